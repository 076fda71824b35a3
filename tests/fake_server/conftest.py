"""Fixtures for the fake_server tests: a control plane on a ManualClock, a runner, a client."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from fake_server import (
    ControlPlane,
    ManualClock,
    Registration,
    Timings,
)

from .fake_server_client import Client

FAST = Timings(poll_hold=15.0, redelivery=5.0, watchdog_tick=5.0, offline_after=35.0)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test here (subfolders included) is fast; fail a hung one in 60 s rather than the
    global 180 s."""
    here = Path(__file__).parent
    for item in items:
        if item.path.is_relative_to(here) and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(60))


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
async def cp(clock: ManualClock) -> AsyncIterator[ControlPlane]:
    async with ControlPlane(timings=FAST, clock=clock, admin_password="admin-pass") as plane:
        yield plane


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as s:
        yield s


@pytest.fixture
async def reg(cp: ControlPlane) -> Registration:
    return await cp.register_runner(name="r1", allowed_profiles=["default", "work"])


@pytest.fixture
def client(cp: ControlPlane, http: aiohttp.ClientSession, reg: Registration) -> Client:
    return Client(http, cp.url, reg.runner_id, reg.token)


@pytest.fixture
def make_client(cp: ControlPlane, http: aiohttp.ClientSession, reg: Registration) -> Callable[..., Client]:
    def make(**kw: Any) -> Client:
        return Client(http, cp.url, kw.pop("runner_id", reg.runner_id), kw.pop("token", reg.token), **kw)

    return make

