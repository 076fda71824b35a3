"""LeaseManager: ``lease.close`` and disposal (tombstones, unbinds, cancellation overtaking a
creation, a close during a bind, per-channel disposal, a 410 from the relay)."""
from __future__ import annotations

import asyncio
import uuid

import pytest

from runner_ref.errors import ServerError
from runner_ref.teamtools import ids
from runner_ref.teamtools.leases import BIND_PATH, UNBIND_PATH
from runner_ref.teamtools.listener import LoopbackListener

from .lease_world import World, call_listener, expect

pytestmark = pytest.mark.timeout(60)


# -- lease.close and disposal ---------------------------------------------------------------------
async def test_close_disposes_tombstones_and_unbinds(world: World) -> None:
    lease_id = await world.create()
    await world.bind(lease_id)
    lease = world.manager.lease(lease_id)
    assert lease is not None
    port, generation = lease.listener.port, lease.generation
    assert await world.manager.close({"leaseId": lease_id}) == {"ok": True}
    assert world.manager.lease(lease_id) is None and world.manager.is_tombstoned(lease_id)
    assert world.plugin.unbinds() == [{"session_id": "rt-1", "generation": generation}]
    with pytest.raises(OSError):
        await asyncio.open_connection("127.0.0.1", port)
    assert await world.manager.close({"leaseId": lease_id}) == {"ok": True}
    assert len(world.plugin.unbinds()) == 1


async def test_close_of_an_unbound_or_unknown_lease(world: World) -> None:
    lease_id = await world.create()
    await world.manager.close({"leaseId": lease_id})
    unknown = str(uuid.uuid4())
    assert await world.manager.close({"leaseId": unknown}) == {"ok": True}
    assert sorted(world.manager.tombstones()) == sorted([lease_id, unknown])
    assert world.plugin.posts == []  # never bound → no unbind
    await expect("runner_error", world.manager.close({"leaseId": "bad"}))


async def test_cancellation_overtaking_creation_leaves_no_lease_one_tombstone_no_bind(
        world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    """Anchor #20: does not recreate a lease when cancellation overtakes its admitted creation."""
    release, starting = asyncio.Event(), asyncio.Event()
    real_start = LoopbackListener.start
    started: list[LoopbackListener] = []

    async def slow_start(self: LoopbackListener) -> None:
        starting.set()
        await release.wait()
        await real_start(self)
        started.append(self)
    monkeypatch.setattr(LoopbackListener, "start", slow_start)
    payload = world.payload()
    creating = asyncio.ensure_future(world.manager.create(payload))
    await asyncio.wait_for(starting.wait(), 5)
    assert await world.manager.close({"leaseId": payload["leaseId"]}) == {"ok": True}
    release.set()
    error = await expect("runner_error", creating)
    assert error.message == "tool grant stopped"
    await expect("runner_lease_expired", world.bind(payload["leaseId"]), 410)
    assert world.manager.active() == [] and world.manager.lease(payload["leaseId"]) is None
    assert world.manager.tombstones() == [payload["leaseId"]]
    assert world.plugin.binds() == []
    with pytest.raises(OSError):  # the listener that did come up was closed at once
        await asyncio.open_connection("127.0.0.1", started[0].port)


async def test_close_during_bind_unbinds_after_the_bind_lands(world: World) -> None:
    lease_id = await world.create()
    world.plugin.gate = asyncio.Event()
    binding = asyncio.ensure_future(world.bind(lease_id))
    await asyncio.wait_for(world.plugin.entered.wait(), 5)
    await asyncio.wait_for(world.manager.close({"leaseId": lease_id}), 5)  # not blocked by bind
    world.plugin.gate.set()
    await expect("runner_lease_expired", binding)
    assert [p for p, _ in world.plugin.posts] == [BIND_PATH, UNBIND_PATH, UNBIND_PATH]


async def test_dispose_channel_only_touches_that_channel(world: World) -> None:
    a, b = await world.create(runtime="rt-1"), await world.create(runtime="rt-2")
    await world.manager.dispose_channel("conn-1")
    assert world.manager.lease(a) is None and world.manager.lease(b) is not None
    assert world.manager.is_tombstoned(a) and not world.manager.is_tombstoned(b)
    await world.manager.dispose_all()
    assert world.manager.active() == [] and world.manager.is_tombstoned(b)


async def test_a_410_from_the_relay_disposes_the_lease(world: World) -> None:
    lease_id = await world.create()
    lease = world.manager.lease(lease_id)
    assert lease is not None
    url, token = lease.listener.url, lease.listener.token
    tool = ids.opaque_id(token, "yaoyao_workspace_form_team")
    status, body = await call_listener(url, token, "/tools/call",
                                       {"toolId": tool, "arguments": {"a": 1}, "callId": "c1"})
    assert status == 200 and body["structuredContent"] == {"done": "yaoyao_workspace_form_team"}
    assert world.relay.calls == [(lease_id, "yaoyao_workspace_form_team", {"a": 1}, "c1")]
    world.relay.error = ServerError(410, "runner_lease_expired", "lease gone")
    status, body = await call_listener(url, token, "/tools/call",
                                       {"toolId": tool, "arguments": {}, "callId": "c2"})
    assert status == 200 and body["isError"] is True
    await asyncio.wait_for(world.manager.drain(), 10)   # the disposal the 410 started
    assert world.manager.lease(lease_id) is None and world.manager.is_tombstoned(lease_id)
