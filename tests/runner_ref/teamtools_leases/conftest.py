"""The ``world`` fixture of the LeaseManager tests: a fresh World, its leases disposed after."""
from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from .lease_world import World


@pytest.fixture
async def world() -> AsyncIterator[World]:
    w = World()
    yield w
    await w.manager.dispose_all()
