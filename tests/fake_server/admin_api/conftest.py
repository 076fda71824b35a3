"""The admin API tests' fixtures: a control plane with an admin account and three sources on a
ManualClock (in place of tests/fake_server's ``cp``), a cookie-keeping ``http`` session, what the
clients saw, and a logged-in ``admin``."""
from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import pytest

from fake_server import ControlPlane, ManualClock

from .admin_client import ADMIN_PW, Admin, Seen


@pytest.fixture
async def cp() -> AsyncIterator[ControlPlane]:
    async with ControlPlane(
        clock=ManualClock(), admin_user="admin", admin_password=ADMIN_PW,
        admin_profiles=("default", "research"),
    ) as plane:
        await plane.store.add_source("node-b", "Node B")
        await plane.store.add_source("paired-web", "Paired web node", paired=True)
        await plane.store.add_source("lab", "Lab", allowed_profiles=["default"])
        yield plane


@pytest.fixture
def seen() -> Seen:
    return Seen()


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    # unsafe=True: aiohttp's jar otherwise refuses cookies from an IP host such as 127.0.0.1
    async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as session:
        yield session


@pytest.fixture
async def admin(cp: ControlPlane, http: aiohttp.ClientSession, seen: Seen) -> Admin:
    client = Admin(cp, http, seen)
    await client.login()
    return client
