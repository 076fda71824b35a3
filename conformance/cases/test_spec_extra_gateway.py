"""Spec-coverage cases for channels, the ledger's rule order and team-tool leases.

Stops are made with the scripted Hermes' pause points (a held session.interrupt, a held
prompt.accept) and the control plane's fault controls (a failed event post); every wait is
bounded. The runner is a black box.
"""

from __future__ import annotations

import asyncio
import math
import os
import string
from typing import Any

from conformance.bounds import scaled
from conformance.marks import case
from conformance.verdict import expect

from ._helpers_channels import (
    WAIT,
    close_while_held,
    effects_of,
    expect_error,
    expect_ok,
    new_session,
    outcome_text,
    prompt,
    socket_of,
    witness,
    ws_closed,
)
from ._helpers_process import bound_lease
from ._helpers_state import prompt_effects
from ._helpers_wire import excerpt

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


@case("ISO-901")
async def test_completed_turn_is_not_interrupted_at_close(world: Any) -> None:
    """A prompt's turn ends (its message.complete is forwarded to the channel); a gateway.close
    then must not send session.interrupt for that session: it is no longer running.

    fails when: the runner marks a session running at prompt.submit and never clears it, so
    every close (and every stop) interrupts idle sessions."""
    cp, rid = world.cp, world.runner_id
    ch = await cp.open_channel(rid)
    sid = await new_session(world, ch)
    sock = await socket_of(world, sid)
    await prompt(world, ch, sid, "hello")
    after = 0
    while True:
        frame = await ch.next_event("message.complete", timeout=WAIT, after=after)
        if frame.get("session_id") == sid:
            break
        after = ch.events.index(frame) + 1
    await world.hermes.effects.wait_for("turn.finished", timeout=WAIT, session_id=sid)
    close = await cp.close_channel(ch)
    expect_ok(world, close, what="gateway.close", needles=[ch.connection_id])
    await ws_closed(world, sock)
    interrupts = effects_of(world, "session.interrupted", session_id=sid)
    expect(not interrupts, expected=f"no session.interrupt for {sid}, whose turn completed",
           actual=f"{len(interrupts)} interrupt(s)", witness=witness(world, sid))


@case("LIM-903")
async def test_rpc_on_a_channel_not_open_is_connection_closed(world: Any) -> None:
    """A channel registered on the control plane but never opened on the runner: an RPC on it
    is refused with runner_connection_closed.

    fails when: the runner refuses it with another code (runner_error, runner_session_forbidden)
    or forwards it."""
    cp, rid = world.cp, world.runner_id
    ch = cp.hub.register_channel(rid, None, 0, None, False, None)
    out = await cp.rpc(ch, "session.usage", {"session_id": "deadbeef"})
    expect_error(world, out, codes=("runner_connection_closed",),
                 what="session.usage on a channel that is not open", needles=[ch.connection_id])


@case("REC-902")
async def test_failed_event_post_disconnects(world: Any) -> None:
    """The control plane answers the runner's next event post 500; the runner must disconnect
    locally: the channel's Hermes socket closes and its next poll is a reset poll.

    fails when: the runner drops the frame and carries on (the channel stays open on a stale
    stream, frames lost without a reconnect)."""
    cp, rid = world.cp, world.runner_id
    ch = await cp.open_channel(rid)
    sid = await new_session(world, ch)
    sock = await socket_of(world, sid)
    mark = cp.history.last_seq
    cp.faults.fail_next("event", status=500, code="internal_error")
    # The failed post may be an event the turn sends before the runner posts the prompt's
    # result; the local disconnect it causes may then end the command runner_offline. Either
    # outcome is the runner's to choose: only the disconnect is judged here.
    await cp.rpc(ch, "prompt.submit", {"session_id": sid, "text": "hello"})
    failed = await world.runner.guard(cp.history.wait_for(
        lambda ex: ex.route == "event" and ex.fault == "fail" and ex.answered,
        timeout=WAIT + 1, after_seq=mark), "the failed event post", WAIT)
    try:
        reset = await cp.history.wait_for(lambda ex: ex.route == "poll" and ex.reset,
                                          timeout=WAIT, after_seq=failed.seq)
    except TimeoutError:
        reset = None
    expect(reset is not None, expected="a reset poll after the event post failed with 500",
           actual="no reset poll", witness=excerpt(world, after_seq=mark))
    closed = await ws_closed(world, sock)
    expect(closed is not None, expected="the channel's Hermes socket closes (local disconnect)",
           actual="still open", witness=witness(world, sid, "ws.closed"))


@case("PERM-902")
async def test_download_reaches_hermes_as_its_realpath(world: Any) -> None:
    """A file inside the artifact root and a symlink to it (also inside): a download of the
    link reaches Hermes as the target's realpath, the path the runner checked.

    fails when: the runner checks the realpath but asks Hermes for the path it was given, so a
    symlink swapped between check and read escapes the roots."""
    root = world.artifact_root
    target = root / "target.txt"
    target.write_bytes(b"real\n")
    link = root / "link.txt"
    os.symlink(target, link)
    from urllib.parse import urlencode
    search = "?" + urlencode({"profile": "default", "path": str(link)})
    mark = world.hermes.effects.entries[-1].seq if world.hermes.effects.entries else 0
    out = await (await world.cp.submit(world.runner_id, "http", {
        "method": "GET", "path": "/api/files/download", "search": search})).wait(WAIT)
    expect(out.ok, expected="the download through an in-root symlink is relayed",
           actual=outcome_text(out))
    asked = [e.detail.get("path") for e in effects_of(world, "file.read", after_seq=mark)]
    real = str(target.resolve())
    expect(asked == [real], expected=f"Hermes asked for the realpath {real}", actual=asked)


@case("DED-901")
async def test_conflict_answered_while_the_original_runs(world: Any) -> None:
    """A prompt.submit is held inside Hermes (before prompt.accept); the control plane gives up
    on it and delivers the same id with another payload: the runner answers
    idempotency_conflict at once, while the original is still held, and the original's prompt
    reaches Hermes once.

    fails when: the runner applies the in-flight rule before the fingerprint (the conflicting
    delivery waits for, then shares, the original's reply)."""
    cp = world.cp
    ch = await cp.open_channel(world.runner_id)
    sid = await new_session(world, ch)
    pause = world.hermes.pause_at("before prompt.accept", session_id=sid)
    handle = await cp.submit_rpc(ch, "prompt.submit", {"session_id": sid, "text": "hello"})
    await pause.reached(timeout=WAIT)
    handle.expire()   # the control plane ends it; the runner still runs it
    other = {**handle.wire["payload"], "params": {"session_id": sid, "text": "other"}}
    try:
        replay = await cp.replay(world.runner_id, handle.wire, payload=other)
        out = await replay.wait(WAIT)
    except TimeoutError:
        out = None
    finally:
        pause.release()
    expect(out is not None and not out.ok and out.code == "idempotency_conflict",
           expected="idempotency_conflict while the original is in flight",
           actual=outcome_text(out), witness=witness(world, handle.id))
    await world.hermes.effects.wait_for("turn.finished", timeout=WAIT, session_id=sid)
    n = len(prompt_effects(world, sid))
    expect(n == 1, expected="the original prompt reached Hermes once", actual=n)


_ALPHABETS = (string.digits + "abcdef", string.digits + "abcdefABCDEF",
              string.ascii_letters + string.digits + "-_", string.ascii_letters + string.digits
              + "+/=", "".join(chr(c) for c in range(33, 127)))


def _bits(token: str) -> float:
    """An upper bound of the randomness a token text can carry: its length times log2 of the
    smallest usual alphabet (hex, base64url, base64, printable ASCII) that holds it."""
    for alphabet in _ALPHABETS:
        if set(token) <= set(alphabet):
            return len(token) * math.log2(len(set(alphabet)))
    return len(token) * 8.0


@case("TT-903", hermes_script="team")
async def test_lease_token_holds_32_bytes(world: Any) -> None:
    """Two bound leases: each token text can carry at least 256 bits (hex ≥ 64 chars,
    base64url ≥ 43, …) and the two differ. The generator's quality cannot be seen from outside;
    the length bound and the difference are what a black box shows.

    fails when: the runner mints short lease tokens (8 random bytes, a counter, a uuid4 hex of
    122 bits) or reuses one token for every lease."""
    a = await bound_lease(world)
    b = await bound_lease(world)
    weak = [f"{len(t)} chars, ≤{_bits(t):.0f} bits" for t in (a.token, b.token) if _bits(t) < 256]
    expect(not weak, expected="lease tokens of at least 32 bytes (256 bits)", actual=weak)
    expect(a.token != b.token, expected="two leases, two tokens", actual="the same token")


@case("TT-904", hermes_script="team")
async def test_bind_without_native_tools_is_unavailable(world: Any) -> None:
    """The plugin answers the first bind {ok:true, native_tools:false}: lease.bind must fail
    with team_tools_unavailable.

    fails when: the runner takes any {ok:true} as bound, so tools are announced to a Hermes
    that cannot serve them natively."""
    b = await bound_lease(world, bind=False)
    world.hermes.bridge.native_tools = False
    out = await world.cp.bind_lease(b.lease)
    expect(not out.ok and out.code == "team_tools_unavailable",
           expected="a bind without native_tools:true → team_tools_unavailable",
           actual=outcome_text(out))


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
