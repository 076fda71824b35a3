"""Long poll, redelivery, deadlines, offline, results and the queue limits (§2.6, §2.7, §5)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from fake_server import ControlPlane, ManualClock, Registration, Timings
from fake_server.timings import MIB

from .fake_server_client import Client

GET_STATUS = {"path": "/api/status", "method": "GET", "search": "?profile=default"}  # as upstream sends it


async def test_long_poll_wakes_on_enqueue(cp: ControlPlane, client: Client, reg: Registration) -> None:
    await client.connect()
    poll = asyncio.create_task(client.poll())
    await cp.poll_held(reg.runner_id)
    assert not poll.done()
    handle = await cp.submit(reg.runner_id, "http", GET_STATUS)
    status, body = await asyncio.wait_for(poll, 5)
    assert status == 200 and [c["id"] for c in body["commands"]] == [handle.id]
    cmd = body["commands"][0]
    assert cmd == {"id": handle.id, "kind": "http", "payload": GET_STATUS,
                   "expiresAt": cp.clock.now_ms() + 30_000}
    assert (await client.post("admit", {"id": handle.id})) == (200, {"allowed": True})
    assert (await client.post("result", {"id": handle.id, "result": {"status": 200}})) == (200, {"ok": True})
    out = await handle
    assert out.ok and out.status == 200 and out.result == {"status": 200}
    # the result is final: a second one is ignored, admit is now false
    assert (await client.post("result", {"id": handle.id, "result": {"status": 500}})) == (200, {"ok": True})
    assert (await handle).result == {"status": 200}
    assert (await client.post("admit", {"id": handle.id})) == (200, {"allowed": False})


async def test_hold_expires_on_clock(cp: ControlPlane, clock: ManualClock, client: Client, reg: Registration) -> None:
    await client.connect()
    poll = asyncio.create_task(client.poll())
    await cp.poll_held(reg.runner_id)
    waiter = cp.held_poll(reg.runner_id)
    assert waiter is not None
    clock.advance(14.9)
    assert not waiter.event.is_set() and cp.held_poll(reg.runner_id) is waiter  # still held
    clock.advance(0.1)
    assert waiter.event.is_set()  # the 15 s hold fired on the clock, no real time passed
    assert await asyncio.wait_for(poll, 5) == (200, {"epoch": client.epoch, "commands": []})


async def test_newer_poll_ends_older(cp: ControlPlane, client: Client, reg: Registration) -> None:
    await client.connect()
    first = asyncio.create_task(client.poll())
    await cp.poll_held(reg.runner_id)
    waiter = cp.held_poll(reg.runner_id)
    second = asyncio.create_task(client.poll())
    assert await asyncio.wait_for(first, 5) == (200, {"epoch": client.epoch, "commands": []})
    await cp.poll_held(reg.runner_id, other_than=waiter)
    handle = await cp.submit(reg.runner_id, "http", GET_STATUS)
    status, body = await asyncio.wait_for(second, 5)
    assert [c["id"] for c in body["commands"]] == [handle.id]


async def test_client_gone_frees_the_poll(cp: ControlPlane, client: Client, reg: Registration) -> None:
    await client.connect()
    poll = asyncio.create_task(client.poll())
    await cp.poll_held(reg.runner_id)
    poll.cancel()
    await cp.poll_released(reg.runner_id)
    await cp.history.wait_for(lambda ex: ex.fault == "client_gone")


async def test_redelivery_until_result(cp: ControlPlane, clock: ManualClock, client: Client, reg: Registration) -> None:
    await client.connect()
    handle = await cp.submit(reg.runner_id, "http", GET_STATUS)
    status, body = await client.poll()
    assert [c["id"] for c in body["commands"]] == [handle.id]
    poll = asyncio.create_task(client.poll())  # held: nothing due
    await cp.poll_held(reg.runner_id)
    waiter = cp.held_poll(reg.runner_id)
    assert waiter is not None
    clock.advance(4.9)
    assert not waiter.event.is_set()  # not yet due
    clock.advance(0.1)
    assert waiter.event.is_set()  # the 5 s redelivery woke the held poll
    status, body = await asyncio.wait_for(poll, 5)
    assert [c["id"] for c in body["commands"]] == [handle.id]  # offered again at 5 s
    assert handle.deliveries == 2 and len(cp.history.deliveries(handle.id)) == 2
    await client.post("result", {"id": handle.id, "result": 1})
    clock.advance(5)
    poll = asyncio.create_task(client.poll())
    await cp.poll_held(reg.runner_id)
    clock.advance(15)
    assert (await asyncio.wait_for(poll, 5))[1]["commands"] == []


async def test_deadline_gives_uncertain(cp: ControlPlane, clock: ManualClock, client: Client, reg: Registration) -> None:
    await client.connect()
    handle = await cp.submit(reg.runner_id, "http", GET_STATUS, deadline=10)
    await client.poll()
    clock.advance(10)
    out = await handle.wait(5)
    assert (out.ok, out.status, out.code) == (False, 504, "runner_command_uncertain")
    assert (await client.post("admit", {"id": handle.id}))[1] == {"allowed": False}
    assert (await client.post("result", {"id": handle.id, "result": 1})) == (200, {"ok": True})
    assert (await handle).code == "runner_command_uncertain"


async def test_default_deadlines(cp: ControlPlane, client: Client, reg: Registration) -> None:
    await client.connect()
    now = cp.clock.now_ms()
    a = await cp.submit(reg.runner_id, "http", GET_STATUS)
    b = await cp.submit(reg.runner_id, "lease.bind", {"leaseId": "x", "session": {}})
    c = await cp.submit(reg.runner_id, "http", {"path": "/api/plugins/yaoyao-bot-bridge/memory-extract",
                                                 "method": "POST"})
    assert [h.expires_at_ms - now for h in (a, b, c)] == [30_000, 70_000, 120_000]


async def test_admit_refuses_expired_by_expires_at(cp: ControlPlane, client: Client, reg: Registration) -> None:
    await client.connect()
    handle = await cp.submit(reg.runner_id, "http", GET_STATUS, expires_at_ms=cp.clock.now_ms() - 1)
    _, body = await client.poll()
    assert body["commands"][0]["expiresAt"] < cp.clock.now_ms()
    assert (await client.post("admit", {"id": handle.id}))[1] == {"allowed": False}


async def test_error_result_is_502_with_runner_code(cp: ControlPlane, client: Client, reg: Registration) -> None:
    await client.connect()
    hs = [await cp.submit(reg.runner_id, "http", GET_STATUS) for _ in range(4)]
    await client.poll()
    await client.post("result", {"id": hs[0].id, "error": {"message": "nope", "code": "runner_http_forbidden"}})
    await client.post("result", {"id": hs[1].id, "error": {"message": "m"}})
    await client.post("result", {"id": hs[2].id, "error": {"message": "x" * 5000, "code": 7}})
    await client.post("result", {"id": hs[3].id, "error": {}})
    outs = [await h for h in hs]
    # upstream: String(code ?? 'runner_error'), so a number code 7 reaches the caller as "7"
    assert [(o.status, o.code) for o in outs] == [
        (502, "runner_http_forbidden"), (502, "runner_error"), (502, "7"), (502, "runner_error")]
    assert outs[0].message == "nope" and len(outs[2].message or "") == 1000


async def test_result_error_leniency_is_upstreams(cp: ControlPlane, client: Client, reg: Registration) -> None:
    """Upstream validates no result schema (audit §2.6 rows 46/48): a string error is an error,
    an empty code is kept, a falsy error is a success, the message is cut at 1000 UTF-16 units."""
    await client.connect()
    hs = [await cp.submit(reg.runner_id, "http", GET_STATUS) for _ in range(4)]
    await client.poll()
    await client.post("result", {"id": hs[0].id, "error": "x"})
    await client.post("result", {"id": hs[1].id, "error": {"message": "m", "code": ""}})
    await client.post("result", {"id": hs[2].id, "error": 0, "result": {"status": 204}})
    await client.post("result", {"id": hs[3].id, "error": {"message": "\U0001F600" * 1000}})
    outs = [await h for h in hs]
    assert [(o.status, o.code) for o in outs[:2]] == [(502, "runner_error"), (502, "")]
    assert outs[2].ok and outs[2].result == {"status": 204}
    assert len(outs[3].message or "") == 500  # 1000 UTF-16 units = 500 emoji


async def test_result_bad_shapes(client: Client) -> None:
    await client.connect()
    assert (await client.post("result", {"id": "unknown", "result": 1})) == (200, {"ok": True})
    # upstream has no result schema: ill-typed ids are unknown ids, ignored with {ok:true}
    assert (await client.post("result", {"result": 1})) == (200, {"ok": True})
    assert (await client.post("result", {"id": 5})) == (200, {"ok": True})
    assert (await client.post("result", {"id": "x", "error": "str"})) == (200, {"ok": True})
    assert (await client.post("admit", {}))[1] == {"allowed": False}
    assert (await client.post("admit", {"id": ["x"]}))[1] == {"allowed": False}


async def test_offline_refusals(cp: ControlPlane, client: Client, reg: Registration) -> None:
    out = await cp.command(reg.runner_id, "http", GET_STATUS)
    assert (out.status, out.code) == (503, "runner_offline")
    await client.connect()
    h1 = await cp.submit(reg.runner_id, "http", GET_STATUS)
    h2 = await cp.submit(reg.runner_id, "http", GET_STATUS)
    await client.poll()
    await cp.force_watchdog(reg.runner_id)
    assert [(await h).code for h in (h1, h2)] == ["runner_offline", "runner_offline"]
    assert (await cp.command(reg.runner_id, "http", GET_STATUS)).code == "runner_offline"


async def test_pending_limit(cp: ControlPlane, client: Client, reg: Registration) -> None:
    await client.connect()
    hs = [await cp.submit(reg.runner_id, "http", GET_STATUS) for _ in range(64)]
    assert not any(h.done() for h in hs)
    extra = await cp.submit(reg.runner_id, "http", GET_STATUS)
    assert ((await extra).status, (await extra).code) == (429, "runner_busy")
    await client.poll()
    await client.post("result", {"id": hs[0].id, "result": None})
    again = await cp.submit(reg.runner_id, "http", GET_STATUS)
    assert not again.done()


async def test_size_limits(cp: ControlPlane, client: Client, reg: Registration) -> None:
    await client.connect()
    single = cp.limits.single_command
    base = len(b'{"id":"00000000-0000-0000-0000-000000000000","kind":"http","payload":{"b":""},"expiresAt":0000000000000}')
    too_big = await cp.submit(reg.runner_id, "http", {"b": "x" * (single - base + 1)}, as_sent=True)
    assert ((await too_big).status, (await too_big).code) == (413, "runner_payload_limit")
    fits = await cp.submit(reg.runner_id, "http", {"b": "x" * (single - base)}, as_sent=True)
    assert not fits.done() and fits.size == single
    # 36 MiB + 28.01 MiB > 64 MiB queued
    over = await cp.submit(reg.runner_id, "http", {"b": "x" * (28 * MIB + 10_000)}, as_sent=True)
    assert ((await over).status, (await over).code) == (429, "runner_busy")
    under = await cp.submit(reg.runner_id, "http", {"b": "x" * (27 * MIB)}, as_sent=True)
    assert not under.done()
    rid = reg.runner_id
    assert cp.queued_bytes(rid) == fits.size + under.size == sum(c.size for c in cp.queued(rid))
    fits.expire()  # an ended command gives its bytes back
    assert cp.queued_bytes(rid) == under.size
    again = await cp.submit(reg.runner_id, "http", {"b": "x" * (36 * MIB - 200)}, as_sent=True)
    assert not again.done()
    await cp.force_watchdog(reg.runner_id)
    assert cp.queued_bytes(rid) == 0 and not cp.queued(rid)


async def test_batch_limit(cp: ControlPlane, client: Client, reg: Registration) -> None:
    await client.connect()
    a = await cp.submit(reg.runner_id, "http", {"b": "x" * (20 * MIB)}, as_sent=True)
    b = await cp.submit(reg.runner_id, "http", {"b": "y" * (20 * MIB)})
    c = await cp.submit(reg.runner_id, "http", GET_STATUS)
    _, body = await client.poll()
    assert [x["id"] for x in body["commands"]] == [a.id, c.id]  # b skipped, c still fits
    _, body = await client.poll()
    assert [x["id"] for x in body["commands"]] == [b.id]


async def test_queue_order_is_kept(cp: ControlPlane, client: Client, reg: Registration) -> None:
    await client.connect()
    hs = [await cp.submit(reg.runner_id, "http", {**GET_STATUS, "n": i}) for i in range(10)]
    _, body = await client.poll()
    assert [c["id"] for c in body["commands"]] == [h.id for h in hs]


async def test_system_clock_hold_and_redelivery(make_client: Callable[..., Client]) -> None:
    """The same timings on the real clock, scaled down."""
    t = Timings(poll_hold=0.2, redelivery=0.2, watchdog_tick=0.1, offline_after=5)
    async with ControlPlane(timings=t) as plane:
        reg = await plane.register_runner()
        c = make_client(runner_id=reg.runner_id, token=reg.token)
        c.base = plane.url
        await c.connect()
        assert (await c.poll())[1]["commands"] == []  # held 0.2 s, then empty
        h = await plane.submit(reg.runner_id, "http", GET_STATUS)
        assert (await c.poll())[1]["commands"][0]["id"] == h.id
        assert (await c.poll())[1]["commands"][0]["id"] == h.id  # redelivered after 0.2 s


async def test_poll_answer_bytes_are_the_compact_json_of_the_batch(
    cp: ControlPlane, client: Client, reg: Registration
) -> None:
    """Commands are serialised once at enqueue and spliced into the answer: the bytes on the wire
    must be exactly the compact JSON of what the history says was answered."""
    import hashlib
    import json

    await client.connect()
    cp.faults.duplicate_deliveries(1)
    payloads: list[dict[str, Any]] = [GET_STATUS, {"path": "/api/status", "method": "GET", "note": "é\u2028😀\"\\"},
                {"nested": {"a": [1, 2.5, None, True], "b": {}}}]
    hs = [await cp.submit(reg.runner_id, "http", p, as_sent=True) for p in payloads]  # bytes as given
    async with client.session.get(client.url("poll"), headers=client.headers()) as resp:
        status, raw = resp.status, await resp.read()
    body = json.loads(raw)
    assert status == 200 and [c["id"] for c in body["commands"]] == [hs[0].id, hs[0].id, hs[1].id, hs[2].id]
    assert raw == json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()
    assert [c["payload"] for c in body["commands"][1:]] == payloads
    ex = cp.history.filter(route="poll")[-1]
    assert ex.response_body == body and ex.response_digest == hashlib.sha256(raw).hexdigest()
    assert [h.size for h in hs] == [len(json.dumps(c, separators=(",", ":"), ensure_ascii=False).encode())
                                    for c in body["commands"][1:]]


async def test_replay_reuses_the_id_and_expiry(
    cp: ControlPlane, clock: ManualClock, client: Client, reg: Registration
) -> None:
    await client.connect()
    first = await cp.submit(reg.runner_id, "http", GET_STATUS)
    status, body = await client.poll()
    wire = body["commands"][0]
    assert (await client.post("result", {"id": first.id, "result": {"status": 200}}))[0] == 200
    assert (await first).ok
    clock.advance(1)  # a fresh expiry would now differ from the original one
    again = await cp.replay(reg.runner_id, wire)
    status, body = await client.poll()
    assert status == 200 and body["commands"] == [wire]        # the very same command
    try:
        await cp.replay(reg.runner_id, wire)                   # still queued: a harness error
    except ValueError:
        pass
    else:
        raise AssertionError("a queued id was queued twice")
    changed = {**GET_STATUS, "path": "/api/config"}
    assert (await client.post("result", {"id": again.id, "result": {"status": 201}}))[0] == 200
    assert (await again).result == {"status": 201}
    conflict = await cp.replay(reg.runner_id, wire, payload=changed)
    status, body = await client.poll()
    assert body["commands"] == [{**wire, "payload": changed}] and conflict.id == wire["id"]
