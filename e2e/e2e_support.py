"""Helpers for the admin-page e2e: a ControlPlane on a background loop (``conformance.portal``),
the reference runner as a subprocess (``conformance.process``, driven through the same portal),
and page actions that drive the admin page like a person would.

Waits are Playwright's own expectations, awaited process events, or ``wait_until``: a bounded
poll of a condition that has no event to await (a page the test must refresh, a flag owned by
the server's loop).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from playwright.sync_api import BrowserContext, Page, expect

from conformance.portal import Portal
from conformance.process import Process, scrubbed_env
from fake_server import ControlPlane

ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = ROOT / "artifacts" / "e2e"
CHROMIUM = os.environ.get("E2E_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ADMIN_USER = "admin"
ADMIN_PW = "e2e-admin-password-0123456789"
SECOND_ADMIN = "admin2"
SECOND_PW = "e2e-second-admin-password-0123"
PROFILES = ["default", "research"]
UI_TIMEOUT_MS = 10_000

T = TypeVar("T")


def wait_until(cond: Callable[[], T], *, timeout: float, what: str, step: float = 0.05) -> T:
    """Poll ``cond`` until it returns something truthy, at most ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        threading.Event().wait(step)  # a bounded poll interval, not a wait for the thing itself


# -- the control plane in a background event loop ----------------------------------------------


class LiveServer:
    """A ControlPlane serving on 127.0.0.1:0 from the portal's thread and event loop."""

    def __init__(self, **kwargs: Any) -> None:
        self._kwargs = kwargs
        self.portal = Portal(name="e2e-cp")
        self.cp: Any = None

    def run(self, coro: Any, timeout: float = 30) -> Any:
        """Await a coroutine on the server's loop."""
        return self.portal.run(coro, timeout=timeout)

    def call(self, fn: Callable[[], T]) -> T:
        """Run a plain function on the server's loop (for non-thread-safe state)."""
        return self.portal.call_sync(fn, timeout=30)

    def start(self) -> LiveServer:
        self.portal.start()

        async def up() -> Any:
            cp = ControlPlane(admin_user=ADMIN_USER, admin_password=ADMIN_PW,
                              admin_profiles=PROFILES, **self._kwargs)
            await cp.start()
            await cp.store.create_account(SECOND_ADMIN, allowed_profiles=PROFILES, is_admin=True,
                                          password=SECOND_PW)
            await cp.store.add_source("node-b", "Build farm")
            await cp.store.add_source("node-c", "Lab machine")
            return cp

        self.cp = self.portal.call(up, timeout=30)
        return self

    def stop(self) -> None:
        try:
            if self.cp is not None:
                self.portal.call(self.cp.stop, timeout=30)
                self.cp = None
        finally:
            self.portal.close()

    @property
    def url(self) -> str:
        return str(self.cp.url)

    def runners(self) -> list[Any]:
        return self.run(self.cp.store.list_runners())

    def is_online(self, runner_id: str) -> bool:
        return bool(self.call(lambda: self.cp.is_online(runner_id)))


# -- the browser -------------------------------------------------------------------------------


@dataclass
class Tab:
    """One browser context + page, with the console errors it produced."""

    context: BrowserContext
    page: Page
    errors: list[str]


def shot(page: Page, artifacts: Path, name: str) -> Path:
    path = artifacts / f"{re.sub(r'[^A-Za-z0-9_.-]+', '-', name)}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


# -- page actions ------------------------------------------------------------------------------


def login(page: Page, url: str, user: str = ADMIN_USER, password: str = ADMIN_PW) -> None:
    page.goto(url + "/admin/")
    page.get_by_label("User name").fill(user)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", name="Execution nodes", level=1)).to_be_visible()
    expect(page.locator("#list-status")).to_contain_text("node")


@dataclass
class Registered:
    config: dict[str, Any]
    path: Path


def fill_registration(
    page: Page,
    name: str,
    *,
    source: str = "local",
    profiles: str = "default",
    server_url: str | None = None,
    hermes_url: str | None = None,
) -> None:
    page.get_by_label("Node name").fill(name)
    page.get_by_label("Source").select_option(source)
    page.get_by_label("Allowed profiles").fill(profiles)
    if server_url is not None:
        page.get_by_label("Yaoyao address reachable from the node").fill(server_url)
    if hermes_url is not None:
        page.get_by_label("Hermes address on the node").fill(hermes_url)


def register(page: Page, tmp_dir: Path, name: str, **kwargs: Any) -> Registered:
    """Fill the form, submit, download runner.json once; returns its parsed content and path."""
    fill_registration(page, name, **kwargs)
    page.get_by_role("button", name="Register node").click()
    download_button = page.get_by_role("button", name="Download runner.json")
    expect(download_button).to_be_visible()
    with page.expect_download() as info:
        download_button.click()
    download = info.value
    assert download.suggested_filename == "runner.json"
    tmp_dir.mkdir(parents=True, exist_ok=True)
    path = tmp_dir / "runner.json"
    download.save_as(str(path))
    os.chmod(path, 0o600)
    expect(page.get_by_text("runner.json downloaded")).to_be_visible()
    return Registered(json.loads(path.read_text()), path)


def runner_item(page: Page, name: str) -> Any:
    return page.locator("li.runner").filter(has=page.get_by_role("heading", name=name, exact=True))


def refresh_until(page: Page, cond: Callable[[], bool], *, timeout: float, what: str) -> None:
    """Press Refresh until ``cond`` holds (bounded)."""

    def attempt() -> bool:
        page.get_by_role("button", name="Refresh").click()
        expect(page.locator("#list-status")).to_contain_text("updated")
        return cond()

    wait_until(attempt, timeout=timeout, what=what, step=0.2)


# -- the reference runner as a subprocess ------------------------------------------------------


class RunnerProcess:
    """``python -m runner_ref --config …`` through ``conformance.process`` (own process group,
    scrubbed environment, output read continuously), driven synchronously over ``portal``;
    ``stop`` always reaps the group."""

    def __init__(self, config: Path, portal: Portal) -> None:
        self.config = config
        self.portal = portal
        env = scrubbed_env({"PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"})
        self.process = Process([sys.executable, "-m", "runner_ref", "--config", str(config)],
                               env=env, cwd=config.parent, tee_dir=config.parent, tee_stem="runner")
        self.stderr_path = config.parent / "runner.stderr"
        self.stdout_path = config.parent / "runner.stdout"
        portal.call(self.process.start, timeout=30)

    @property
    def proc(self) -> RunnerProcess:
        """Popen-like view (``proc.proc.poll()``) kept for the tests written against Popen."""
        return self

    def poll(self) -> int | None:
        return self.process.returncode

    def output(self) -> str:
        return self.process.output().decode(errors="replace")

    def wait(self, timeout: float) -> int:
        return self.portal.call(self.process.wait, timeout)

    def stop(self) -> None:
        self.portal.call(self.process.stop, 10.0)

    def wait_online(self, server: LiveServer, runner_id: str, timeout: float) -> bool:
        """Await (on the portal) the runner's online state or its exit, whichever comes first:
        True once online, False when the process exited first (fail fast, no poll)."""

        async def race() -> bool:
            online = asyncio.ensure_future(server.cp.wait_online(runner_id, timeout))
            exited = asyncio.ensure_future(self.process.wait(timeout))
            done, pending = await asyncio.wait({online, exited},
                                               return_when=asyncio.FIRST_COMPLETED)
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
            if online in done:
                online.result()   # re-raises a timeout
                return True
            return False

        return self.portal.call(race, timeout=timeout + 5)
