"""Per-runner channel and lease counts (§5).

Upstream's hub has NO server-side cap: the 65th ``gateway.open`` / ``lease.create`` reaches the
runner, whose own 64 limit must refuse it (the default here too). The harness extra
``Limits(channels_per_runner=64, leases_per_runner=64)`` refuses at the caller with 429
``runner_busy`` (our choice of code), off by default.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import aiohttp
import pytest

from fake_server import CommandFailed, ControlPlane, Limits, ManualClock, Registration

from .conftest import FAST
from .fake_server_client import AutoRunner, Client

SESSION = {"runtimeId": "rt-1", "storedId": "s-1"}
CAPPED = Limits(channels_per_runner=64, leases_per_runner=64)


async def test_no_server_cap_by_default_the_65th_reaches_the_runner(
    cp: ControlPlane, client: Client, reg: Registration
) -> None:
    assert cp.limits.channels_per_runner is None and cp.limits.leases_per_runner is None
    await client.connect()
    opened = [await cp.submit_open_channel(reg.runner_id, profile="default") for _ in range(64)]
    _, body = await client.poll()
    for c in body["commands"]:  # the runner opens them (64 pending is the queue's own limit)
        await client.post("result", {"id": c["id"], "result": {}})
    assert all([(await h).ok for _, h in opened]) and len(cp.channels(reg.runner_id)) == 64
    ch65, h65 = await cp.submit_open_channel(reg.runner_id, profile="default")
    assert not h65.done()
    _, body = await client.poll()
    assert [c["id"] for c in body["commands"]] == [h65.id]  # the 65th reaches the runner
    assert len(cp.channels(reg.runner_id)) == 65
    ch = opened[0][0]
    leases = [cp.hub.register_lease(ch, "default", SESSION, [], {}) for _ in range(65)]
    assert len(cp.leases(reg.runner_id)) == 65 and all(lease.active for lease in leases)


@pytest.fixture
async def capped(clock: ManualClock) -> AsyncIterator[ControlPlane]:
    async with ControlPlane(timings=FAST, clock=clock, limits=CAPPED) as plane:
        yield plane


@pytest.fixture
async def capped_client(capped: ControlPlane, http: aiohttp.ClientSession) -> tuple[Client, Registration]:
    r = await capped.register_runner(name="r1", allowed_profiles=["default", "work"])
    return Client(http, capped.url, r.runner_id, r.token), r


async def test_65th_channel_is_refused_at_the_caller_opt_in(
    capped: ControlPlane, capped_client: tuple[Client, Registration]
) -> None:
    cp, (client, reg) = capped, capped_client
    await client.connect()
    assert cp.limits.channels_per_runner == 64
    opened = [await cp.submit_open_channel(reg.runner_id, profile="default") for _ in range(64)]
    assert not any(h.done() for _, h in opened)  # pending opens count toward the limit
    ch, handle = await cp.submit_open_channel(reg.runner_id, profile="default")
    out = await handle
    assert (out.status, out.code) == (429, "runner_busy")
    assert ch.closed.is_set() and ch.closed_by == "open_failed" and ch.open_outcome == out
    assert ch.connection_id not in cp.channels(reg.runner_id)
    # nothing was queued for the refused channel: the batch carries exactly the 64 opens
    _, body = await client.poll()
    assert [c["id"] for c in body["commands"]] == [h.id for _, h in opened]
    with pytest.raises(CommandFailed) as failed:
        await cp.open_channel(reg.runner_id, profile="default")
    assert (failed.value.outcome.status, failed.value.outcome.code) == (429, "runner_busy")
    refused = await cp.open_channel(reg.runner_id, profile="default", check=False)
    assert refused.open_outcome is not None and refused.open_outcome.code == "runner_busy"
    assert refused.closed_by == "open_failed" and refused.connection_id not in cp.channels(reg.runner_id)
    # a closed channel frees its place
    cp.hub.close_channel(opened[0][0], "harness")
    _, again = await cp.submit_open_channel(reg.runner_id, profile="default")
    assert not again.done()


async def test_65th_lease_is_refused_at_the_caller_opt_in(
    capped: ControlPlane, capped_client: tuple[Client, Registration]
) -> None:
    cp, (client, reg) = capped, capped_client
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
        assert refused.lease_id not in cp.leases(reg.runner_id)
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
        first = asyncio.create_task(plane.create_lease(chans[0][0], profile="default", session=SESSION,
                                                       check=False))
        await plane.lifecycle.wait_for(lambda f: f.kind == "queued" and f.lease_id is not None)
        second = await plane.create_lease(chans[0][0], profile="default", session=SESSION, check=False)
        assert second.create_outcome is not None and second.create_outcome.code == "runner_busy"
        clock.advance(plane.timings.command_deadline)  # the first lease.create times out
        lease = await asyncio.wait_for(first, 5)
        assert lease.create_outcome is not None and lease.create_outcome.code == "runner_command_uncertain"
        assert not plane.leases(reg.runner_id)  # dropped: the place is free again
        # and, as upstream's dispose(), a lease.close for it follows the failed create
        close = await plane.lifecycle.wait_for(lambda f: f.kind == "queued" and f.detail.get("kind") == "lease.close")
        assert [c.wire["payload"] for c in plane.queued(reg.runner_id) if c.id == close.command_id] == [
            {"leaseId": lease.lease_id}]
