"""Fixtures for the admin-page e2e (helpers live in ``e2e_support``).

A real ControlPlane on 127.0.0.1:0 in a background loop, Debian's Chromium driven by Playwright's
sync API (Playwright cannot download a browser here), and the reference runner as a subprocess
in its own process group, always reaped.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, BrowserContext, Playwright, sync_playwright

from fake_server import Timings

from .e2e_support import (
    ARTIFACTS,
    CHROMIUM,
    CHROMIUM_ARGS,
    UI_TIMEOUT_MS,
    LiveServer,
    RunnerProcess,
    Tab,
)


@pytest.fixture
def server() -> Iterator[LiveServer]:
    live = LiveServer(timings=Timings(poll_hold=2.0, redelivery=1.0, watchdog_tick=1.0, offline_after=7.0))
    live.start()
    try:
        yield live
    finally:
        live.stop()


# Module scope, not session: while sync Playwright runs, its event loop is the running loop of
# this thread, and pytest-asyncio tests sharing the worker (pytest -n) could not start theirs.
# pytest tears a module fixture down as soon as the next test is from another module.
@pytest.fixture(scope="module")
def playwright_instance() -> Iterator[Playwright]:
    with sync_playwright() as pw:
        yield pw


@pytest.fixture(scope="module")
def browser(playwright_instance: Playwright) -> Iterator[Browser]:
    b = playwright_instance.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
    try:
        yield b
    finally:
        b.close()


@pytest.fixture
def new_tab(browser: Browser) -> Iterator[Callable[..., Tab]]:
    made: list[BrowserContext] = []

    def make(width: int = 1280, height: int = 720) -> Tab:
        ctx = browser.new_context(viewport={"width": width, "height": height}, accept_downloads=True)
        ctx.set_default_timeout(UI_TIMEOUT_MS)
        made.append(ctx)
        page = ctx.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        return Tab(ctx, page, errors)

    yield make
    for ctx in made:
        ctx.close()


@pytest.fixture
def tab(new_tab: Callable[..., Tab]) -> Tab:
    return new_tab()


@pytest.fixture(scope="session")
def artifacts() -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS


@pytest.fixture
def start_runner(server: LiveServer) -> Iterator[Callable[[Path], RunnerProcess]]:
    procs: list[RunnerProcess] = []

    def start(config: Path) -> RunnerProcess:
        proc = RunnerProcess(config, server.portal)
        procs.append(proc)
        return proc

    yield start
    for proc in procs:
        proc.stop()

