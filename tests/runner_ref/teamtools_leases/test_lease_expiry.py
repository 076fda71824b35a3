"""LeaseManager: expiry and renewal (re-binds every 5 minutes on the fake clock and on the real
one, failed renewals, vanished sessions) and a creation cancelled or failing mid-start."""
from __future__ import annotations

import asyncio

import pytest

from runner_ref.teamtools.leases import LeaseManager
from runner_ref.teamtools.listener import LoopbackListener

from .lease_world import World, call_listener, expect

pytestmark = pytest.mark.timeout(60)


# -- expiry and renewal --------------------------------------------------------------------------
async def test_renewal_rebinds_every_5_minutes(world: World) -> None:
    lease_id = await world.create()
    await world.bind(lease_id)
    world.clock.advance(299)
    await world.manager.tick()
    assert len(world.plugin.binds()) == 1
    world.clock.advance(1)
    await world.manager.tick()
    binds = world.plugin.binds()
    assert len(binds) == 2 and binds[1]["generation"] == binds[0]["generation"]
    assert binds[1]["expires_at"] == binds[0]["expires_at"] + 300_000
    for _ in range(12):  # an hour of renewals keeps it alive past the 30 min TTL
        world.clock.advance(300)
        await world.manager.tick()
    assert world.manager.lease(lease_id) is not None and len(world.plugin.binds()) == 14


async def test_a_failed_renewal_disposes(world: World) -> None:
    lease_id = await world.create()
    await world.bind(lease_id)
    world.plugin.replies.append((503, None))
    world.clock.advance(300)
    await world.manager.tick()
    assert world.manager.lease(lease_id) is None and world.manager.is_tombstoned(lease_id)
    assert len(world.plugin.unbinds()) == 1


async def test_renewal_disposes_a_lease_whose_session_is_gone(world: World) -> None:
    lease_id = await world.create()
    del world.sessions.owners["rt-1"]
    world.clock.advance(300)
    await world.manager.tick()
    assert world.manager.lease(lease_id) is None
    assert world.plugin.posts == []


async def test_expiry_without_renewal(world: World) -> None:
    manager = LeaseManager(relay=world.relay, plugin=world.plugin, sessions=world.sessions,
                           clock=world.clock, ttl=10.0, renew_every=100.0, auto_renew=False)
    p = world.payload()
    await manager.create(p)
    await manager.bind({"leaseId": p["leaseId"], "session": {"runtimeId": "rt-1"}})
    lease = manager.lease(p["leaseId"])
    assert lease is not None
    url, token = lease.listener.url, lease.listener.token
    world.clock.advance(10)
    status, body = await call_listener(url, token, "/tools/list", {})
    assert (status, body["code"]) == (410, "team_tools_expired")  # before any tick
    await manager.tick()
    assert manager.lease(p["leaseId"]) is None and len(world.plugin.unbinds()) == 1
    await manager.dispose_all()


async def test_the_background_timer_renews_on_the_real_clock() -> None:
    w = World()
    manager = LeaseManager(relay=w.relay, plugin=w.plugin, sessions=w.sessions,
                           ttl=5.0, renew_every=0.1)
    p = w.payload()
    await manager.create(p)
    await manager.bind({"leaseId": p["leaseId"], "session": {"runtimeId": "rt-1"}})
    await asyncio.wait_for(w.plugin.wait_binds(3), 10)   # the timer re-binds on its own
    assert len(w.plugin.binds()) >= 3
    await manager.dispose_all()
    assert manager.active() == [] and len(w.plugin.unbinds()) == 1


async def test_a_create_cancelled_or_failing_mid_start_leaves_nothing(
        world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    starting, never = asyncio.Event(), asyncio.Event()

    async def stuck_start(self: LoopbackListener) -> None:
        starting.set()
        await never.wait()
    monkeypatch.setattr(LoopbackListener, "start", stuck_start)
    payload = world.payload()
    creating = asyncio.ensure_future(world.manager.create(payload))
    await asyncio.wait_for(starting.wait(), 5)
    creating.cancel()
    with pytest.raises(asyncio.CancelledError):
        await creating
    assert world.manager.lease(payload["leaseId"]) is None

    async def broken_start(self: LoopbackListener) -> None:
        raise OSError("no ports left")
    monkeypatch.setattr(LoopbackListener, "start", broken_start)
    await expect("runner_error", world.manager.create(payload))
    assert world.manager.lease(payload["leaseId"]) is None and world.manager.active() == []
