"""Per-runner limits of §5 the caller meets: 64 channels and 64 leases (→ 429 runner_busy).

Upstream refuses to open a 65th channel or lease for a runner at the caller; the status and
code (429 ``runner_busy``) are our choice, documented in docs/protocol.md and harness-api.md.
"""

from __future__ import annotations

import asyncio

import pytest
from fake_server_client import AutoRunner, Client, until

from fake_server import CommandFailed, ControlPlane, Limits, ManualClock
from fake_server.control import Registration

SESSION = {"runtimeId": "rt-1", "storedId": "s-1"}


async def test_65th_channel_is_refused_at_the_caller(cp: ControlPlane, client: Client, reg: Registration) -> None:
    await client.connect()
    assert cp.limits.channels_per_runner == 64
    opened = [await cp.submit_open_channel(reg.runner_id, profile="default") for _ in range(64)]
    assert not any(h.done() for _, h in opened)  # pending opens count toward the limit
    ch, handle = await cp.submit_open_channel(reg.runner_id, profile="default")
    out = await handle
    assert (out.status, out.code) == (429, "runner_busy")
    assert ch.closed.is_set() and ch.closed_by == "open_failed" and ch.open_outcome == out
    assert ch.connection_id not in cp.hub.slots[reg.runner_id].channels
    # nothing was queued for the refused channel: the batch carries exactly the 64 opens
    _, body = await client.poll()
    assert [c["id"] for c in body["commands"]] == [h.id for _, h in opened]
    with pytest.raises(CommandFailed) as failed:
        await cp.open_channel(reg.runner_id, profile="default")
    assert (failed.value.outcome.status, failed.value.outcome.code) == (429, "runner_busy")
    refused = await cp.open_channel(reg.runner_id, profile="default", check=False)
    assert refused.open_outcome is not None and refused.open_outcome.code == "runner_busy"
    assert refused.closed_by == "open_failed" and refused.connection_id not in cp.hub.slots[reg.runner_id].channels
    # a closed channel frees its place
    cp.hub.close_channel(opened[0][0], "harness")
    _, again = await cp.submit_open_channel(reg.runner_id, profile="default")
    assert not again.done()


async def test_65th_lease_is_refused_at_the_caller(cp: ControlPlane, client: Client, reg: Registration) -> None:
    assert cp.limits.leases_per_runner == 64
    async with AutoRunner(client):
        ch = await cp.open_channel(reg.runner_id, profile="default")
        leases = await asyncio.gather(
            *[cp.create_lease(ch, profile="default", session=SESSION) for _ in range(64)])
        assert all(lease.active for lease in leases)
        with pytest.raises(CommandFailed) as failed:
            await cp.create_lease(ch, profile="default", session=SESSION)
        assert (failed.value.outcome.status, failed.value.outcome.code) == (429, "runner_busy")
        sent = len(cp.history.filter(route="poll"))
        refused = await cp.create_lease(ch, profile="default", session=SESSION, check=False)
        assert not refused.active and refused.create_outcome is not None
        assert (refused.create_outcome.status, refused.create_outcome.code) == (429, "runner_busy")
        assert refused.lease_id not in cp.hub.slots[reg.runner_id].leases
        assert not any(c["payload"].get("leaseId") == refused.lease_id
                       for ex in cp.history.filter(route="poll")[sent - 1:] for c in ex.commands)
        cp.revoke_lease(leases[0])  # a dropped lease frees its place
        assert (await cp.create_lease(ch, profile="default", session=SESSION)).active


async def test_limits_are_configurable(client: Client) -> None:
    clock = ManualClock()
    async with ControlPlane(clock=clock, limits=Limits(channels_per_runner=2, leases_per_runner=1)) as plane:
        reg = await plane.register_runner()
        c = Client(client.session, plane.url, reg.runner_id, reg.token)
        await c.connect()
        chans = [await plane.submit_open_channel(reg.runner_id) for _ in range(3)]
        assert [h.done() for _, h in chans] == [False, False, True]
        assert (await chans[2][1]).code == "runner_busy"
        slot = plane.hub.slots[reg.runner_id]
        first = asyncio.create_task(plane.create_lease(chans[0][0], profile="default", session=SESSION,
                                                       check=False))
        await until(lambda: len(slot.leases) == 1)
        second = await plane.create_lease(chans[0][0], profile="default", session=SESSION, check=False)
        assert second.create_outcome is not None and second.create_outcome.code == "runner_busy"
        clock.advance(plane.timings.command_deadline)  # the first lease.create times out
        lease = await asyncio.wait_for(first, 5)
        assert lease.create_outcome is not None and lease.create_outcome.code == "runner_command_uncertain"
        assert not slot.leases  # dropped: the place is free again
