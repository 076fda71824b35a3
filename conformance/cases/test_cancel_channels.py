"""CAN — cancel races of channels: closes that overtake opens, slow RPCs, interrupts, tombstones,
requests in flight when a channel closes (rows: conformance/rows/cancel.py; leases:
test_cancel_leases.py; admits pending while a permission changes: test_cancel_admits.py)."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from conformance.bounds import scaled
from conformance.marks import case
from conformance.verdict import CaseFailed, expect
from conformance.witness import witness

from ._helpers_channels import (
    WAIT,
    close_while_held,
    effects_of,
    event_for,
    expect_error,
    expect_no_effect,
    expect_ok,
    new_session,
    open_sockets,
    outcome_text,
    prompt,
    socket_of,
    start_behind_proxy,
    ws_closed,
)
from ._helpers_state import prompt_effects


@case("CAN-001", start_runner=False)
async def test_close_overtaking_a_pending_open_leaves_no_channel(world: Any) -> None:
    """gateway.open is held in the Hermes WebSocket handshake (a proxy holds the upgrade); a
    gateway.close for the same id is answered meanwhile; once the handshake is let through, no
    channel may live: its socket closes and an RPC on the id is refused without reaching Hermes.

    fails when: the runner registers the channel only after the handshake completed (the close
    finds nothing, the late open then revives the channel and the socket stays open)."""
    proxy = await start_behind_proxy(world)
    cp, rid = world.cp, world.runner_id
    proxy.hold(r"^GET /api/ws")
    ch, opening = await cp.submit_open_channel(rid)
    await asyncio.wait_for(proxy.held.get(), scaled(WAIT))
    close = await cp.command(rid, "gateway.close", {"connectionId": ch.connection_id})
    expect_ok(world, close, what="gateway.close while the open is held in the handshake",
              needles=[ch.connection_id])
    proxy.release()
    await opening.wait(WAIT)
    for sock in open_sockets(world):
        if await ws_closed(world, sock) is None:
            raise CaseFailed("no Hermes socket alive after the close overtook the open",
                             f"socket {sock} still open (open answered "
                             f"{outcome_text(opening.outcome)})",
                             witness(world, ch.connection_id, "ws."))
    if not ch.closed.is_set():
        out = await cp.rpc(ch, "session.create", {"profile": "default", "cols": 100})
        expect_error(world, out, what="session.create on the overtaken channel",
                     needles=[ch.connection_id])
    expect_no_effect(world, "session.created", what="after the close overtook the open",
                     needles=[ch.connection_id])


@case("CAN-002")
async def test_close_is_answered_while_an_rpc_is_held(world: Any) -> None:
    """session.usage is held inside Hermes (pause point before the method); gateway.close must be
    answered while it is still held.

    fails when: the runner runs a channel's commands one at a time, or the close waits for the
    channel's pending RPCs."""
    cp, rid = world.cp, world.runner_id
    ch = await cp.open_channel(rid)
    sid = await new_session(world, ch)
    pause = world.hermes.pause_at("before session.usage", session_id=sid)
    slow = await cp.submit_rpc(ch, "session.usage", {"session_id": sid})
    await pause.reached(timeout=WAIT)
    try:
        close = await asyncio.wait_for(cp.close_channel(ch), scaled(WAIT))
    except TimeoutError:
        raise CaseFailed("gateway.close answered while session.usage is held in Hermes",
                         f"no close result within {WAIT} s",
                         witness(world, ch.connection_id)) from None
    finally:
        pause.release()
    expect_ok(world, close, what="gateway.close during a held RPC", needles=[ch.connection_id])
    await slow.wait(WAIT)


@case("CAN-003")
async def test_close_interrupts_running_sessions_first(world: Any) -> None:
    """A turn is running (HANGTEST waits for an interrupt); gateway.close must send
    session.interrupt for it before the Hermes socket closes.

    fails when: gateway.close only closes the socket (no interrupt)."""
    cp, rid = world.cp, world.runner_id
    ch = await cp.open_channel(rid)
    sid = await new_session(world, ch)
    sock = await socket_of(world, sid)
    await prompt(world, ch, sid, "HANGTEST")
    await world.hermes.effects.wait_for("prompt.accepted", timeout=WAIT, session_id=sid)
    close = await cp.close_channel(ch)
    expect_ok(world, close, what="gateway.close", needles=[ch.connection_id])
    closed = await ws_closed(world, sock)
    interrupts = effects_of(world, "session.interrupted", session_id=sid)
    expect(interrupts and (closed is None or interrupts[0].seq < closed.seq),
           expected=f"session.interrupt for running session {sid} before its socket closes",
           actual=f"interrupts {[e.seq for e in interrupts]}, ws.closed "
                  f"{closed.seq if closed else None}",
           witness=witness(world, sid, "ws.closed"))


@case("CAN-004")
async def test_open_of_a_recently_closed_id_fails(world: Any) -> None:
    """A channel is opened and closed; a gateway.open of the same connectionId right after must
    fail and connect no new Hermes socket.

    fails when: the runner does not tombstone closed connection ids."""
    cp, rid = world.cp, world.runner_id
    ch = await cp.open_channel(rid)
    expect_ok(world, await cp.close_channel(ch), what="gateway.close", needles=[ch.connection_id])
    mark = world.hermes.effects.entries[-1].seq if world.hermes.effects.entries else 0
    again = await cp.open_channel(rid, connection_id=ch.connection_id, check=False)
    expect_error(world, again.open_outcome, what="gateway.open of an id closed just now",
                 needles=[ch.connection_id])
    expect_no_effect(world, "ws.connected", after_seq=mark,
                     what="a refused re-open of a tombstoned id", needles=[ch.connection_id])


@case("CAN-008")
async def test_interrupt_rpc_reaches_hermes(world: Any) -> None:
    """session.interrupt as gateway.rpc on a running turn must reach Hermes (after its admit)
    and end the turn as interrupted.

    fails when: the runner swallows session.interrupt (answers without sending it)."""
    cp = world.cp
    ch = await cp.open_channel(world.runner_id)
    sid = await new_session(world, ch)
    await prompt(world, ch, sid, "HANGTEST")
    await world.hermes.effects.wait_for("prompt.accepted", timeout=WAIT, session_id=sid)
    handle = await cp.submit_rpc(ch, "session.interrupt", {"session_id": sid})
    out = await handle.wait(WAIT)
    expect_ok(world, out, what="session.interrupt", needles=[sid])
    found = effects_of(world, "session.interrupted", session_id=sid)
    admits = [ex for ex in cp.history.filter(route="admit") if ex.command_id == handle.id]
    expect(found and admits and admits[0].seq_out is not None
           and admits[0].seq_out < found[0].seq,
           expected="a session.interrupted effect after the interrupt's admit",
           actual=f"effects {[e.seq for e in found]}, admit {[a.seq_out for a in admits]}",
           witness=witness(world, sid, handle.id))
    done = await event_for(ch, "message.complete", sid)
    expect((done.get("payload") or {}).get("status") == "interrupted",
           expected="the turn ends interrupted", actual=str(done.get("payload"))[:200])


@case("CAN-011")
async def test_close_after_failed_open(world: Any) -> None:
    """A gateway.open with a computer target fails on a core runner; the control plane then
    closes the same id (as upstream does) and the harness closes it once more. Both closes are
    answered without error and no Hermes socket was ever opened.

    fails when: closing an id whose open failed answers an error (or the failed open left a
    socket)."""
    cp, rid = world.cp, world.runner_id
    computer = {"id": str(uuid.uuid4()), "ownerKey": "0" * 64}
    ch = await cp.open_channel(rid, check=False, computer=computer, workId=str(uuid.uuid4()))
    expect_error(world, ch.open_outcome, what="gateway.open with a computer target on a core "
                 "runner", needles=[ch.connection_id])
    out = await cp.command(rid, "gateway.close", {"connectionId": ch.connection_id})
    expect_ok(world, out, what="gateway.close after the failed open", needles=[ch.connection_id])
    expect_no_effect(world, "ws.connected", what="a failed gateway.open",
                     needles=[ch.connection_id])


#: gateway.close must end "within about 3 s"; the case waits this long (a bound, not a timing)
CLOSE_BOUND = 12.0


@case("CAN-901")
async def test_close_is_bounded_by_a_held_interrupt(world: Any) -> None:
    """A turn runs (HANGTEST); Hermes holds the session.interrupt the close sends; the
    gateway.close must still be answered (within a bound of 12 s) while the interrupt is held.

    fails when: gateway.close waits for the interrupt replies without a time bound (a hung
    Hermes then blocks every close)."""
    cp, rid = world.cp, world.runner_id
    ch = await cp.open_channel(rid)
    sid = await new_session(world, ch)
    await prompt(world, ch, sid, "HANGTEST")
    await world.hermes.effects.wait_for("prompt.accepted", timeout=WAIT, session_id=sid)
    pause = world.hermes.pause_at("before session.interrupt", session_id=sid)
    try:
        close = await asyncio.wait_for(cp.close_channel(ch), scaled(CLOSE_BOUND))
    except TimeoutError:
        close = None
    held = pause.hit is not None   # the interrupt reached Hermes and is held until released
    pause.release()
    expect(close is not None, expected=f"gateway.close answered within {CLOSE_BOUND:.0f} s "
                                       "while Hermes holds the session.interrupt",
           actual="no answer", witness=witness(world, ch.connection_id))
    expect_ok(world, close, what="gateway.close with a held interrupt",
              needles=[ch.connection_id])
    expect(held, expected="the close's session.interrupt held in Hermes",
           actual="no interrupt reached Hermes")


@case("CAN-902")
async def test_create_in_flight_at_close_is_uncertain(world: Any) -> None:
    """Hermes holds a session.create (pause point before it); gateway.close of its channel;
    the create's result, as the runner posts it, is runner_command_uncertain (the session may
    exist in Hermes).

    fails when: the runner answers the interrupted create with another code
    (runner_connection_closed, runner_error) that says nothing was done."""
    from ._helpers_wire import posted_code

    cp = world.cp
    ch = await cp.open_channel(world.runner_id)
    pause = world.hermes.pause_at("before session.create")
    handle = await cp.submit_rpc(ch, "session.create", {"profile": "default", "cols": 100})
    await close_while_held(world, ch, pause)
    ex = await world.runner.guard(cp.history.wait_for(
        lambda e: e.route == "result" and e.command_id == handle.id, timeout=WAIT + 1),
        "the create's result post", WAIT)
    expect(posted_code(ex) == "runner_command_uncertain",
           expected="the interrupted session.create answered runner_command_uncertain",
           actual=posted_code(ex) or "a result", witness=witness(world, handle.id))


@case("CAN-903")
async def test_request_in_flight_at_close_is_not_resent(world: Any) -> None:
    """Hermes holds a prompt.submit (pause point before it is accepted); gateway.close of its
    channel fails the request before its reply. Once the pause is released and the command's
    result is posted, Hermes must have received that prompt once: the original only, on its
    own socket, never again on another one.

    fails when: the runner retries a request whose connection dropped before the reply (on a
    fresh Hermes socket, at-least-once delivery), so a prompt that Hermes already holds runs
    twice."""
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
