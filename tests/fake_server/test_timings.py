"""Every timing is configurable and runs on the injected clock (issue 2 item 3; §2.5, §2.6, §2.7).

The defaults (15 s hold, 5 s redelivery, 5 s tick / 35 s watchdog, 30/70/120 s deadlines) are
checked by test_queue / test_epochs on a ManualClock; here odd values prove nothing is hard-wired.
"""

from __future__ import annotations

import asyncio

from fake_server import ControlPlane, ManualClock, Timings

from .fake_server_client import Client

ODD = Timings(poll_hold=2.5, redelivery=1.5, watchdog_tick=0.5, offline_after=20.0,
              command_deadline=7.0, bind_deadline=9.0, extract_deadline=11.0)
STATUS = {"path": "/api/status", "method": "GET"}


async def test_odd_timings_drive_hold_redelivery_watchdog_and_deadlines(client: Client) -> None:
    clock = ManualClock(start=1_000_000.0)
    async with ControlPlane(timings=ODD, clock=clock) as plane:
        reg = await plane.register_runner()
        c = Client(client.session, plane.url, reg.runner_id, reg.token)
        await c.connect()

        # hold: 2.5 s
        poll = asyncio.create_task(c.poll())
        await plane.poll_held(reg.runner_id)
        waiter = plane.held_poll(reg.runner_id)
        assert waiter is not None
        clock.advance(2.49)
        assert not waiter.event.is_set()
        clock.advance(0.01)
        assert (await asyncio.wait_for(poll, 5))[1]["commands"] == []

        # deadlines: 7 / 9 / 11 s
        now = clock.now_ms()
        h = await plane.submit(reg.runner_id, "http", STATUS)
        b = await plane.submit(reg.runner_id, "lease.bind", {"leaseId": "x", "session": {}})
        e = await plane.submit(reg.runner_id, "http", {"path": "/api/plugins/yaoyao-bot-bridge/memory-extract"})
        assert [x.expires_at_ms - now for x in (h, b, e)] == [7000, 9000, 11000]

        # redelivery: 1.5 s
        assert [x["id"] for x in (await c.poll())[1]["commands"]] == [h.id, b.id, e.id]
        poll = asyncio.create_task(c.poll())
        await plane.poll_held(reg.runner_id)
        clock.advance(1.49)
        assert not poll.done() and plane.held_poll(reg.runner_id) is not None
        clock.advance(0.01)
        assert [x["id"] for x in (await asyncio.wait_for(poll, 5))[1]["commands"]] == [h.id, b.id, e.id]

        clock.advance(5.5)  # 7 s after enqueue: the http command ends uncertain, the others wait
        assert ((await h.wait(5)).status, (await h).code) == (504, "runner_command_uncertain")
        assert not b.done() and not e.done()

        # the other deadlines, then the watchdog: last seen when the held poll arrived
        # (t=2.5 s; seen is refreshed on arrival), offline 20 s later, ended by the next tick
        clock.advance(4.0)  # t=13.5: bind (9 s after 2.5) and extract (11 s) have passed
        assert ((await b).code, (await e).code) == ("runner_command_uncertain",) * 2
        assert plane.is_online(reg.runner_id)
        clock.advance(8.99)  # t=22.49
        assert plane.is_online(reg.runner_id) and plane.disconnects(reg.runner_id) == []
        clock.advance(0.01)  # t=22.5: unseen for 20 s
        assert not plane.is_online(reg.runner_id)
        clock.advance(0.5)
        assert plane.disconnects(reg.runner_id) == ["watchdog"]


async def test_watchdog_tick_and_offline_after_are_separate_knobs(client: Client) -> None:
    clock = ManualClock()
    async with ControlPlane(timings=Timings(watchdog_tick=3.0, offline_after=4.0), clock=clock) as plane:
        reg = await plane.register_runner()
        c = Client(client.session, plane.url, reg.runner_id, reg.token)
        await c.connect()
        start = clock.now()
        first_tick = min(t for t in clock.pending() if t > start)
        clock.advance(first_tick - start)  # tick at ≤3 s: seen < 4 s ago, stays
        assert plane.disconnects(reg.runner_id) == [] and plane.is_online(reg.runner_id)
        clock.advance(4.0 - (first_tick - start))  # 4 s unseen: offline by definition
        assert not plane.is_online(reg.runner_id) and plane.epoch(reg.runner_id) is not None  # not yet ticked
        clock.advance(3.0)  # the next tick disconnects
        assert plane.disconnects(reg.runner_id) == ["watchdog"] and plane.epoch(reg.runner_id) is None


async def test_artifact_orphan_timeout_and_limits_come_from_the_control_plane(client: Client) -> None:
    import hashlib
    import uuid

    from fake_server import Limits

    from .fake_server_client import AutoRunner

    clock = ManualClock()
    t = Timings(artifact_orphan_after=12.0, watchdog_tick=5.0)
    async with ControlPlane(timings=t, clock=clock, limits=Limits(artifact_size=10)) as plane:
        reg = await plane.register_runner()
        c = Client(client.session, plane.url, reg.runner_id, reg.token)
        async with AutoRunner(c):
            ch = await plane.open_channel(reg.runner_id)
        digest = hashlib.sha256(b"x").hexdigest()
        base = {"connectionId": ch.connection_id, "id": str(uuid.uuid4())}
        big = await c.post("artifact", {**base, "phase": "begin", "name": "a", "size": 11, "digest": digest})
        assert big[0] >= 400  # over the configured 10-byte artifact limit
        ok = await c.post("artifact", {**base, "phase": "begin", "name": "a", "size": 1, "digest": digest})
        assert ok[0] == 200, ok
        clock.advance(10.0)  # idle 10 s (tick at 5 and 10): kept
        assert plane.hub.slots[reg.runner_id].uploads.active() == [base["id"]]
        await c.post("admit", {"id": "x"})  # any request keeps the runner online
        clock.advance(5.0)  # idle 15 s > 12 s at the 15 s tick: dropped
        status, body = await c.post("artifact", {**base, "phase": "append", "index": 0, "data": "eA=="})
        assert (status, body["code"]) == (404, "artifact_missing")
