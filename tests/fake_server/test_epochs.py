"""Epoch changes (§2.4, §2.5): restart, watchdog, disable, reset, replacement; fencing."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from fake_server import ControlPlane, ManualClock, Registration

from .fake_server_client import Client


async def test_restart_new_hub_uuid_and_registrations_kept(
    cp: ControlPlane, client: Client, reg: Registration
) -> None:
    old = await client.connect()
    url = cp.url
    held = asyncio.create_task(client.poll())
    await cp.poll_held(reg.runner_id)
    await cp.restart()
    assert cp.url == url
    # the held poll ends (the hub closed, then the server went away)
    status, _ = await asyncio.wait_for(held, 5)
    assert status in (409, 200) or status >= 500
    assert not cp.is_online(reg.runner_id)
    status, body = await client.post("admit", {"id": "x"})  # old epoch, no state
    assert (status, body["code"]) == (409, "runner_instance_changed")
    new = await client.connect()
    assert new.split(":")[0] != old.split(":")[0] and new.split(":")[1] != old.split(":")[1]
    assert await cp.store.get_runner(reg.runner_id) is not None


async def test_restart_clears_retired(
    cp: ControlPlane, client: Client, make_client: Callable[..., Client]
) -> None:
    await client.connect()
    await make_client().connect()
    assert (await client.poll(reset=True))[0] == 409
    await cp.restart()
    assert (await client.poll(reset=True))[0] == 200


async def test_watchdog_by_clock(cp: ControlPlane, clock: ManualClock, client: Client, reg: Registration) -> None:
    old = await client.connect()
    clock.advance(30)
    assert cp.is_online(reg.runner_id)
    clock.advance(4.99)
    assert cp.is_online(reg.runner_id)  # seen 34.99 s ago
    clock.advance(0.02)  # now unseen for 35 s: offline by definition; the 5 s tick disconnects
    assert not cp.is_online(reg.runner_id)
    clock.advance(5)
    assert cp.disconnects(reg.runner_id) == ["watchdog"]
    status, body = await client.post("admit", {"id": "x"})
    assert body["code"] == "runner_instance_changed"
    assert (await client.connect()) != old


async def test_live_runner_stays_online(cp: ControlPlane, clock: ManualClock, client: Client, reg: Registration) -> None:
    epoch = await client.connect()
    for _ in range(6):  # 6 held polls of 15 s: 90 s, far beyond 35 s
        poll = asyncio.create_task(client.poll())
        await cp.poll_held(reg.runner_id)
        clock.advance(15)
        assert (await asyncio.wait_for(poll, 5))[0] == 200
    assert cp.epoch(reg.runner_id) == epoch and cp.disconnects(reg.runner_id) == []


async def test_watchdog_wakes_held_poll_with_instance_changed(
    cp: ControlPlane, clock: ManualClock, client: Client, reg: Registration
) -> None:
    await client.connect()
    poll = asyncio.create_task(client.poll())
    await cp.poll_held(reg.runner_id)
    await cp.force_watchdog(reg.runner_id)
    status, body = await asyncio.wait_for(poll, 5)
    assert (status, body["code"]) == (409, "runner_instance_changed")


async def test_disable_disconnects_at_once(cp: ControlPlane, client: Client, reg: Registration) -> None:
    await client.connect()
    handle = await cp.submit(reg.runner_id, "http", {"path": "/api/status", "method": "GET"})
    await client.poll()
    poll = asyncio.create_task(client.poll())
    await cp.poll_held(reg.runner_id)
    assert await cp.disable_runner(reg.runner_id)
    assert (await asyncio.wait_for(poll, 5))[1]["code"] == "runner_instance_changed"
    assert ((await handle).status, (await handle).code) == (503, "runner_offline")
    assert (await client.poll(reset=True))[1]["code"] == "runner_unauthorized"
    rec = await cp.store.get_runner(reg.runner_id)
    assert rec is not None and not rec.enabled


async def test_reset_poll_and_replacement_each_new_epoch(
    cp: ControlPlane, client: Client, make_client: Callable[..., Client], reg: Registration
) -> None:
    e1 = await client.connect()
    e2 = await client.connect()  # reset from the same instance
    e3 = await make_client().connect()  # instance replacement
    await cp.force_watchdog(reg.runner_id)
    assert len({e1, e2, e3}) == 3 and cp.epochs(reg.runner_id) == [e1, e2, e3]
    assert cp.disconnects(reg.runner_id) == ["reset", "replaced", "watchdog"]


async def test_poll_without_reset_keeps_epoch(cp: ControlPlane, client: Client, reg: Registration) -> None:
    epoch = await client.connect()
    await cp.submit(reg.runner_id, "http", {"path": "/api/status", "method": "GET"})
    status, body, _ = await client.request("poll", headers={"x-runner-epoch": "anything"})
    assert status == 200 and body["epoch"] == epoch  # the epoch header is ignored on poll


async def test_wait_online_and_epoch_change(cp: ControlPlane, client: Client, reg: Registration) -> None:
    waiting = asyncio.create_task(cp.wait_online(reg.runner_id, timeout=5))
    epoch = await client.connect()
    assert await waiting == epoch
    changed = asyncio.create_task(cp.wait_epoch_change(reg.runner_id, epoch, timeout=5))
    await client.connect()
    assert await changed == client.epoch != epoch
