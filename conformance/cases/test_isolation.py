"""ISO — session isolation: events only on the owning channel, foreign sessions refused,
one channel's end never ends another (rows: conformance/rows/isolation.py)."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import aiohttp

from conformance.bounds import scaled
from conformance.marks import case
from conformance.verdict import CaseFailed, expect
from conformance.witness import witness
from fixtures.hermes.script import Script

from ._helpers_channels import (
    WAIT,
    effects_of,
    event_for,
    expect_error,
    expect_no_effect,
    expect_ok,
    new_session,
    outcome_text,
    prompt,
    socket_of,
    stays_online,
    ws_closed,
)

#: session.info right behind the session.create reply, both in one transport write (one TCP
#: segment): a runner's reader has both frames before anything else runs.
INFO_AT_ONCE = {"version": 1, "session_info_delay": 0, "session_info_same_write": True,
                "rules": [], "default": {"steps": [{"say": "hello"}]}}
#: The bundled "slow" script, and every session's events sent to every open Hermes socket too.
BROADCAST = Script.bundled("slow", broadcast_events=True)


def _foreign(frames: list[dict[str, Any]], own: set[str]) -> list[dict[str, Any]]:
    return [f for f in frames if f.get("session_id") not in own]


@case("ISO-001", hermes_script=BROADCAST)
async def test_events_reach_only_the_owning_channel(world: Any) -> None:
    """Two channels, one session each; a turn runs on A's session, then one on B's. Hermes
    sends every session's events to both sockets (``broadcast_events``), so each channel's
    socket carries the other's frames too. Every frame on A names A's session, every frame on B
    names B's session.

    fails when: the runner broadcasts a Hermes frame to every channel, routes by socket instead
    of by owned session, or forwards whatever arrives on a channel's socket."""
    cp, rid = world.cp, world.runner_id
    a, b = await asyncio.gather(cp.open_channel(rid), cp.open_channel(rid))
    sa, sb = await new_session(world, a), await new_session(world, b)
    await prompt(world, a, sa, "SLOWTEST")
    await event_for(a, "message.complete", sa)
    await prompt(world, b, sb, "hello")
    await event_for(b, "message.complete", sb)
    stray_a, stray_b = _foreign(a.events, {sa}), _foreign(b.events, {sb})
    expect(not stray_a and not stray_b,
           expected="each channel carries only its own session's frames",
           actual=f"on A {len(stray_a)} foreign frame(s), on B {len(stray_b)} "
                  f"(first: {(stray_a + stray_b)[:1]})",
           witness=witness(world, a.connection_id, b.connection_id, last=8))


@case("ISO-002")
async def test_rpc_on_another_channels_session_is_refused(world: Any) -> None:
    """B sends prompt.submit naming A's session: refused runner_session_forbidden, and Hermes
    never receives the prompt.

    fails when: the runner checks only that the session exists, not that this channel owns it."""
    cp, rid = world.cp, world.runner_id
    a, b = await asyncio.gather(cp.open_channel(rid), cp.open_channel(rid))
    sa = await new_session(world, a)
    await new_session(world, b)
    out = await cp.rpc(b, "prompt.submit", {"session_id": sa, "text": "hijack"})
    expect_error(world, out, codes=("runner_session_forbidden",),
                 what="prompt.submit on B naming A's session", needles=[sa, b.connection_id])
    expect_no_effect(world, "prompt.accepted", session_id=sa, what="a refused foreign prompt",
                     needles=[sa])


@case("ISO-003")
async def test_rpc_on_a_session_not_made_by_the_runner_is_refused(world: Any) -> None:
    """A session is created on Hermes by another client (not through the runner); an rpc naming
    it is refused runner_session_forbidden and reaches no Hermes handler.

    fails when: the runner forwards any live session id Hermes knows."""
    from fixtures.hermes.client import GatewayClient

    cp = world.cp
    ch = await cp.open_channel(world.runner_id)
    await new_session(world, ch)
    async with aiohttp.ClientSession() as http:
        other = await GatewayClient.connect(http, world.hermes.ws_url)
        try:
            reply = await other.request("session.create", {"cols": 80})
            foreign = (reply.get("result") or {}).get("session_id")
            if not isinstance(foreign, str):
                raise CaseFailed("a session made by another client", str(reply)[:200])
            out = await cp.rpc(ch, "prompt.submit", {"session_id": foreign, "text": "hi"})
            expect_error(world, out, codes=("runner_session_forbidden",),
                         what="prompt.submit naming a session made outside the runner",
                         needles=[foreign])
            usage = await cp.rpc(ch, "session.close", {"session_id": foreign})
            expect_error(world, usage, codes=("runner_session_forbidden",),
                         what="session.close naming a session made outside the runner",
                         needles=[foreign])
            expect_no_effect(world, "prompt.accepted", session_id=foreign,
                             what="a prompt on a foreign session", needles=[foreign])
            expect_no_effect(world, "session.closed", session_id=foreign,
                             what="a close of a foreign session", needles=[foreign])
        finally:
            await other.ws.close()


@case("ISO-004")
async def test_revoking_one_channel_closes_only_it(world: Any) -> None:
    """A and B run turns; A is revoked on the control plane while its stream is paused in
    Hermes. A's next event gets 410 and the runner closes A. B's socket stays open, B's
    running session gets no interrupt, B still answers RPCs and the runner keeps its epoch.

    fails when: a 410 on one channel closes every channel or disconnects the runner."""
    cp, rid = world.cp, world.runner_id
    epoch = cp.epoch(rid)
    a, b = await asyncio.gather(cp.open_channel(rid), cp.open_channel(rid))
    sa, sb = await new_session(world, a), await new_session(world, b)
    sock_a, sock_b = await socket_of(world, sa), await socket_of(world, sb)
    await prompt(world, b, sb, "HANGTEST")
    await world.hermes.effects.wait_for("prompt.accepted", timeout=WAIT, session_id=sb)
    pause = world.hermes.pause_at("before message.delta #2", session_id=sa)
    await prompt(world, a, sa, "SLOWTEST")
    await pause.reached(timeout=WAIT)
    cp.revoke_channel(a)
    pause.release()
    try:
        await asyncio.wait_for(a.closed.wait(), scaled(WAIT))
    except TimeoutError:
        raise CaseFailed("the revoked channel A is closed after its 410",
                         "A still open on the control plane", witness(world, a.connection_id)) from None
    closed_a = await ws_closed(world, sock_a)
    expect(closed_a is not None, expected="A's Hermes socket closes",
           actual="no ws.closed for A's socket", witness=witness(world, a.connection_id))
    usage = await cp.rpc(b, "session.usage", {"session_id": sb})
    expect_ok(world, usage, what="session.usage on B after A was revoked",
              needles=[b.connection_id])
    expect(not b.closed.is_set() and not world.hermes.effects.of("ws.closed", socket_id=sock_b),
           expected="B stays open", actual=f"B closed_by {b.closed_by}",
           witness=witness(world, b.connection_id))
    expect_no_effect(world, "session.interrupted", session_id=sb,
                     what="B's running session after A was revoked", needles=[sb])
    await stays_online(world, epoch, what="after one channel was revoked")


@case("ISO-005", hermes_script=INFO_AT_ONCE)
async def test_event_right_behind_the_create_reply_is_forwarded(world: Any) -> None:
    """Hermes sends session.info right behind the session.create reply, in the same transport
    write (``session_info_same_write``), for two sessions; the runner must forward each on the
    channel.

    fails when: the runner registers ownership only when its awaiting coroutine resumes after
    the reply (the frame right behind it is read first and dropped as foreign). With both
    frames in one read this happens every time, not only when the scheduler is unlucky."""
    ch = await world.cp.open_channel(world.runner_id)
    for _ in range(2):
        sid = await new_session(world, ch)
        # A turn after it: frames are posted in Hermes' order (ISO-006), so a forwarded
        # session.info is on the channel before this turn's message.complete.
        await prompt(world, ch, sid, "hello")
        done = await event_for(ch, "message.complete", sid, timeout=WAIT)
        before = ch.events[:ch.events.index(done)]
        mine = [f.get("type") for f in before if f.get("session_id") == sid]
        expect("session.info" in mine,
               expected=f"the session.info right behind the session.create reply of {sid} "
                        "forwarded on the channel (before the next turn's frames)",
               actual=f"frames of {sid} on the channel: {mine}", witness=witness(world, sid))


@case("ISO-006")
async def test_events_are_posted_in_hermes_order(world: Any) -> None:
    """SLOWTEST streams 40 deltas "slow 0 " … "slow 39 "; the channel must receive them in that
    order, between message.start and message.complete.

    fails when: the runner posts frames concurrently (one task per frame) and reorders them."""
    ch = await world.cp.open_channel(world.runner_id)
    sid = await new_session(world, ch)
    await prompt(world, ch, sid, "SLOWTEST")
    await event_for(ch, "message.complete", sid)
    mine = [f for f in ch.events if f.get("session_id") == sid]
    types = [f.get("type") for f in mine]
    deltas = [(f.get("payload") or {}).get("text") for f in mine if f.get("type") == "message.delta"]
    want = [f"slow {i} " for i in range(40)]
    start, done = types.index("message.start"), types.index("message.complete")
    expect(deltas == want and start < types.index("message.delta") and done > start,
           expected="message.start, 40 deltas in Hermes' order, then message.complete",
           actual=f"types {types[:6]}…, deltas {deltas[:5]}… ({len(deltas)})",
           witness=witness(world, sid, last=6))


@case("ISO-007")
async def test_hermes_closing_the_socket_closes_the_channel(world: Any) -> None:
    """Hermes closes the channel's WebSocket; the runner posts {connectionId, closed:true} and
    the control plane's channel ends closed by the runner.

    fails when: the runner does not tell the control plane that a channel's socket ended."""
    cp = world.cp
    ch = await cp.open_channel(world.runner_id)
    await new_session(world, ch)
    mark = cp.history.last_seq
    await world.hermes.ws.close_all()
    try:
        await asyncio.wait_for(ch.closed.wait(), scaled(WAIT))
    except TimeoutError:
        raise CaseFailed("an event {connectionId, closed:true} after Hermes closed the socket",
                         "the channel is still open", witness(world, ch.connection_id)) from None
    posts = [ex for ex in cp.history.filter(route="event") if ex.seq > mark
             and ex.connection_id == ch.connection_id
             and isinstance(ex.request_body, dict) and ex.request_body.get("closed")]
    expect(ch.closed_by == "runner" and posts,
           expected="the channel closed by the runner's closed:true event",
           actual=f"closed_by {ch.closed_by}, closed posts {len(posts)}",
           witness=witness(world, ch.connection_id))


@case("ISO-008")
async def test_frames_without_session_id_are_not_forwarded(world: Any) -> None:
    """Hermes sends gateway.ready (no session_id) on every socket; after a full turn, no frame
    on the channel lacks a session_id.

    fails when: the runner forwards every Hermes event frame."""
    ch = await world.cp.open_channel(world.runner_id)
    sid = await new_session(world, ch)
    await prompt(world, ch, sid, "hello")
    await event_for(ch, "message.complete", sid)
    bare = [f for f in ch.events if not f.get("session_id")]
    expect(not bare, expected="no forwarded frame without session_id",
           actual=f"{len(bare)} such frame(s): {[f.get('type') for f in bare][:5]}",
           witness=witness(world, ch.connection_id, "gateway.ready", last=6))


@case("ISO-009")
async def test_resumed_session_becomes_owned(world: Any) -> None:
    """A stored session is resumed through the channel; prompt.submit on the returned session
    is allowed and its events are forwarded on that channel.

    fails when: only session.create registers ownership (resume is forwarded but not owned)."""
    cp = world.cp
    stored = world.hermes.add_stored_session(
        messages=[{"role": "user", "text": "earlier"}, {"role": "assistant", "text": "ok"}],
        title="resume me", profile="default")
    ch = await cp.open_channel(world.runner_id)
    out = await cp.rpc(ch, "session.resume", {"session_id": stored, "profile": "default",
                                              "cols": 100})
    expect_ok(world, out, what="session.resume of a stored session", needles=[stored])
    sid = out.result.get("session_id") if isinstance(out.result, dict) else None
    if not isinstance(sid, str):
        raise CaseFailed("a session.resume result with a session_id", outcome_text(out))
    await prompt(world, ch, sid, "hello again")
    try:
        await event_for(ch, "message.complete", sid)
    except TimeoutError:
        raise CaseFailed(f"the resumed session {sid}'s events on the channel",
                         f"frames: {[f.get('type') for f in ch.events]}",
                         witness(world, sid)) from None


@case("ISO-010")
async def test_410_on_event_closes_only_that_channel(world: Any) -> None:
    """The control plane answers A's next event 410 runner_connection_closed; the runner closes
    A's socket, B keeps working and the runner stays online in the same epoch.

    fails when: a 410 on event is treated as a failed post (local disconnect of everything), or
    closes other channels too."""
    cp, rid = world.cp, world.runner_id
    epoch = cp.epoch(rid)
    a, b = await asyncio.gather(cp.open_channel(rid), cp.open_channel(rid))
    sa, sb = await new_session(world, a), await new_session(world, b)
    sock_a, sock_b = await socket_of(world, sa), await socket_of(world, sb)
    await event_for(a, "session.info", sa)
    cp.faults.fail_next("event", status=410, code="runner_connection_closed",
                        target=a.connection_id)
    await prompt(world, a, sa, "hello")
    closed_a = await ws_closed(world, sock_a)
    expect(closed_a is not None, expected="A's Hermes socket closed after the 410",
           actual="A's socket still open", witness=witness(world, a.connection_id))
    await prompt(world, b, sb, "hello")
    await event_for(b, "message.complete", sb)
    expect(not world.hermes.effects.of("ws.closed", socket_id=sock_b),
           expected="B's socket stays open", actual="B's socket closed",
           witness=witness(world, b.connection_id))
    await stays_online(world, epoch, what="after a 410 on one channel's event")


@case("ISO-011", hermes_script="team")
async def test_lease_for_an_unowned_session_is_refused(world: Any) -> None:
    """lease.create names a session id no channel of the runner owns: refused
    runner_session_forbidden, and the plugin sees no bind.

    fails when: lease.create trusts the control plane's session id without an ownership check."""
    cp = world.cp
    ch = await cp.open_channel(world.runner_id)
    await new_session(world, ch)
    foreign = uuid.uuid4().hex[:8]
    lease = await cp.create_lease(ch, profile="default", check=False,
                                  session={"runtimeId": foreign, "storedId": None})
    expect_error(world, lease.create_outcome, codes=("runner_session_forbidden",),
                 what="lease.create for a session no channel owns", needles=[lease.lease_id])
    expect_no_effect(world, "bind", what="a refused lease", needles=[lease.lease_id])


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
