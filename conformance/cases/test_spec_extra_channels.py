"""Spec-coverage cases for a channel's running sessions and its in-flight requests (protocol 1
§3.2, §3.3; rows: conformance/rows/spec_extra_gateway.py).

Stops are made with the scripted Hermes' pause points and its queued-prompt behaviour (a
prompt.submit while a turn runs interrupts that turn and starts the queued one on Hermes' own
timing, announced by a ``message.start`` only); every wait is bounded. The runner is a black
box.
"""

from __future__ import annotations

from typing import Any

from conformance.bounds import scaled
from conformance.marks import case
from conformance.verdict import expect

from ._helpers_channels import (
    WAIT,
    close_while_held,
    effects_of,
    expect_ok,
    new_session,
    prompt,
    socket_of,
    witness,
    ws_closed,
)


async def _nth_event(ch: Any, type_: str, sid: str, n: int) -> dict[str, Any]:
    """The ``n``-th forwarded frame (1-based) of ``type_`` for session ``sid`` (bounded wait)."""
    after, seen = 0, 0
    while True:
        frame = await ch.next_event(type_, timeout=WAIT, after=after)
        after = ch.events.index(frame) + 1
        if frame.get("session_id") == sid:
            seen += 1
            if seen == n:
                return frame


@case("ISO-902")
async def test_queued_turn_started_by_hermes_is_running(world: Any) -> None:
    """A turn runs (HANGTEST); a second prompt.submit is queued, which ends the first turn
    (its message.complete is forwarded, so the session is no longer running) and makes Hermes
    start the queued turn by itself, announced only by a second ``message.start``. Once that
    frame is forwarded, a gateway.close must send session.interrupt for the session before its
    socket closes: the queued turn is running.

    fails when: the runner marks a session running only at its own prompt.submit (and clears
    it at message.complete), so a turn Hermes starts from its queue is closed without an
    interrupt and keeps running in Hermes."""
    cp = world.cp
    ch = await cp.open_channel(world.runner_id)
    sid = await new_session(world, ch)
    sock = await socket_of(world, sid)
    await prompt(world, ch, sid, "HANGTEST first")
    await world.hermes.effects.wait_for("prompt.accepted", timeout=WAIT, session_id=sid)
    await prompt(world, ch, sid, "HANGTEST queued")
    await _nth_event(ch, "message.complete", sid, 1)   # the first turn ended: not running
    await _nth_event(ch, "message.start", sid, 2)      # Hermes started the queued turn
    started = effects_of(world, "prompt.accepted", session_id=sid)
    expect(len(started) == 2 and started[-1].detail.get("queued") is True,
           expected="the queued prompt started by Hermes", actual=[e.detail for e in started])
    mark = world.hermes.effects.entries[-1].seq
    close = await cp.close_channel(ch)
    expect_ok(world, close, what="gateway.close", needles=[ch.connection_id])
    closed = await ws_closed(world, sock)
    interrupts = effects_of(world, "session.interrupted", session_id=sid, after_seq=mark)
    expect(bool(interrupts) and (closed is None or interrupts[0].seq < closed.seq),
           expected=f"session.interrupt for {sid}, whose queued turn Hermes started "
                    "(message.start forwarded), before its socket closes",
           actual=f"interrupts {[e.seq for e in interrupts]}, ws.closed "
                  f"{closed.seq if closed else None}",
           witness=witness(world, sid, "ws.closed"))


@case("CAN-903")
async def test_request_in_flight_at_close_is_not_resent(world: Any) -> None:
    """Hermes holds a prompt.submit (pause point before it is accepted); gateway.close of its
    channel fails the request before its reply. Once the pause is released and the command's
    result is posted, Hermes must have received that prompt once: the original only, on its
    own socket, never again on another one.

    fails when: the runner retries a request whose connection dropped before the reply (on a
    fresh Hermes socket, at-least-once delivery), so a prompt that Hermes already holds runs
    twice."""
    from ._helpers_state import prompt_effects
    from ._helpers_wire import posted_code

    cp = world.cp
    ch = await cp.open_channel(world.runner_id)
    sid = await new_session(world, ch)
    sock = await socket_of(world, sid)
    pause = world.hermes.pause_at("before prompt.accept", session_id=sid)
    handle = await cp.submit_rpc(ch, "prompt.submit", {"session_id": sid, "text": "hello"})
    await close_while_held(world, ch, pause)
    await world.hermes.effects.wait_for(          # the held original reaches Hermes' session
        None, timeout=WAIT, session_id=sid,
        where=lambda e: e.kind in ("prompt.accepted", "prompt.queued") and e.socket_id == sock)
    ex = await world.runner.guard(cp.history.wait_for(
        lambda e: e.route == "result" and e.command_id == handle.id, timeout=WAIT + 1),
        "the prompt's result post", WAIT)
    got = prompt_effects(world, sid)
    expect(len(got) == 1,
           expected="the prompt in flight at close reached Hermes once (not resent)",
           actual=f"{len(got)} prompt.submit(s) in Hermes, on sockets "
                  f"{[e.socket_id for e in got]}; result {posted_code(ex) or 'success'}",
           witness=witness(world, sid, handle.id))


@case("TT-909", hermes_script="team")
async def test_stored_id_changed_during_bind_binds_again(world: Any) -> None:
    """Hermes holds the plugin's first bind of a lease (pause point before bridge.bind); while
    it is held, Hermes gives the session a new stored session (a session.info with the new
    stored_session_id, forwarded to the channel, so the runner has read it); once released,
    lease.bind succeeds and the runner binds once more, with the new stored id.

    fails when: the runner binds once and leaves a stored id that changed meanwhile to the next
    5-min re-check, so the plugin serves tools bound to a stored session Hermes left."""
    import asyncio

    from ._helpers_process import bound_lease

    b = await bound_lease(world, bind=False)
    rt, old = b.session["runtimeId"], b.session.get("storedId")
    pause = world.hermes.pause_at("before bridge.bind", session_id=rt)
    bind = asyncio.ensure_future(world.cp.bind_lease(b.lease))
    try:
        await pause.reached(timeout=WAIT)
        new = await world.hermes.new_stored_id(rt)
        after = 0
        while True:   # the runner forwarded the new stored id: it has read it
            frame = await b.channel.next_event("session.info", timeout=WAIT, after=after)
            after = b.channel.events.index(frame) + 1
            payload = frame.get("payload") or {}
            if frame.get("session_id") == rt and payload.get("stored_session_id") == new:
                break
    finally:
        pause.release()
    out = await asyncio.wait_for(bind, scaled(WAIT))
    expect(out.ok, expected="lease.bind succeeds", actual=f"{out.status} {out.code}",
           witness=witness(world, rt))
    try:
        binds = await world.hermes.effects.wait_for_count("bind", 2, timeout=WAIT, session_id=rt)
    except TimeoutError:
        binds = world.hermes.effects.of("bind", session_id=rt)
    sent = [e.stored_session_id for e in binds]
    expect(len(sent) >= 2 and sent[0] == old and sent[-1] == new,
           expected=f"a first bind with {old}, then one more with the new stored id {new}",
           actual=f"binds with {sent}", witness=witness(world, rt))
