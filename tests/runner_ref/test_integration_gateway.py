"""Gateways through the runner process: fake control plane ⇄ runner_ref ⇄ scripted Hermes,
all on 127.0.0.1 sockets. Session flow, isolation, allowlists, close interrupts, a 410 closes
only its channel, an epoch change drops every channel."""
from __future__ import annotations

import asyncio
import signal
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from fixtures import ScriptedHermes

from .integration import Rig, rig

SCRIPT: dict[str, Any] = {
    "version": 1,
    "rules": [
        {"name": "hang", "match": {"prefix": "HANGTEST"}, "steps": [
            {"stream": ["slow 0 ", "slow 1 "]}, {"name": "hang", "wait": "interrupt"}]},
        {"name": "stream", "match": {"prefix": "STREAM"}, "steps": [
            {"stream": {"template": "s{i} ", "count": 60}, "delay": 0.05}]},
    ],
    "default": {"steps": [{"say": "Hello from the fake model."}, {"say": " PONG-42"}]},
}


async def create_session(cp: Any, ch: Any) -> str:
    out = await cp.rpc(ch, "session.create", {"profile": "default", "title": "t", "cols": 100})
    assert out.ok, out
    return str(out.result["session_id"])


async def start_hang(cp: Any, ch: Any, sid: str) -> None:
    """Submit a HANGTEST prompt and wait until it streams: the session is running."""
    assert (await cp.rpc(ch, "prompt.submit", {"session_id": sid, "text": "HANGTEST"})).ok
    await ch.next_event("message.delta", timeout=10)


@dataclass
class World:
    """A scripted Hermes and a runner process against a fake control plane."""

    hermes: ScriptedHermes
    r: Rig

    @property
    def cp(self) -> Any:
        return self.r.cp

    async def channel(self, **kw: Any) -> Any:
        return await self.cp.open_channel(self.r.runner_id, account="alice", profile="default",
                                          **kw)


@dataclass
class Session:
    """A world with one open channel and one session created on it."""

    world: World
    ch: Any
    sid: str

    @property
    def hermes(self) -> ScriptedHermes:
        return self.world.hermes

    @property
    def r(self) -> Rig:
        return self.world.r

    @property
    def cp(self) -> Any:
        return self.world.r.cp


@pytest.fixture
async def world(tmp_path: Path) -> AsyncIterator[World]:
    async with ScriptedHermes(SCRIPT) as hermes, rig(tmp_path, hermes.url) as r:
        yield World(hermes, r)


@pytest.fixture
async def session(world: World) -> Session:
    ch = await world.channel()
    return Session(world, ch, await create_session(world.cp, ch))


def before(hermes: ScriptedHermes, first: str, then: str, **match: Any) -> bool:
    """The first ``first`` effect (matching ``match``) was recorded before the last ``then``."""
    a, b = hermes.effects.of(first, **match), hermes.effects.of(then)
    return bool(a and b) and a[0].seq < b[-1].seq


async def test_session_flow_events_and_close(session: Session) -> None:
    cp, ch, sid, hermes = session.cp, session.ch, session.sid, session.hermes
    out = await cp.rpc(ch, "prompt.submit", {"session_id": sid, "text": "hi"})
    assert out.ok and out.result == {"status": "streaming"}
    done = await ch.next_event("message.complete", timeout=10)
    assert done["session_id"] == sid and "PONG-42" in done["payload"]["text"]
    assert all(e.get("session_id") == sid for e in ch.events)
    assert hermes.effects.count("prompt.accepted") == 1
    listed = await cp.rpc(ch, "session.active_list",
                          {"profile": "default", "current_session_id": sid})
    assert listed.ok and [s["id"] for s in listed.result["sessions"]] == [sid]
    bad = await cp.rpc(ch, "session.active_list", {"current_session_id": sid},
                       as_sent=True)  # malformed on purpose
    assert bad.code == "runner_session_forbidden"
    closed = await cp.close_channel(ch)
    assert closed.ok and closed.result == {"ok": True}
    await hermes.effects.wait_for("ws.closed", timeout=5)


async def test_session_isolation_and_allowlist(world: World) -> None:
    cp, hermes = world.cp, world.hermes
    a = await world.channel()
    b = await world.channel()
    sa = await create_session(cp, a)
    sb = await create_session(cp, b)
    stolen = await cp.rpc(b, "prompt.submit", {"session_id": sa, "text": "steal"})
    assert (stolen.status, stolen.code) == (502, "runner_session_forbidden")
    assert hermes.effects.count("prompt.accepted") == 0
    assert (await cp.rpc(a, "session.list", {})).code == "runner_command_forbidden"
    # Hermes lists every live session (sa and sb); the runner answers with sa's only
    listed = await cp.rpc(a, "session.active_list",
                          {"profile": "default", "current_session_id": sa})
    assert listed.ok and [set(s) for s in listed.result["sessions"]] == [{"id", "status"}]
    assert [s["id"] for s in listed.result["sessions"]] == [sa]
    peek = await cp.rpc(a, "session.active_list",
                        {"profile": "default", "current_session_id": sb})
    assert peek.code == "runner_session_forbidden"
    assert (await cp.rpc(a, "session.create", {"profile": "other"})).code in (
        "runner_profile_forbidden",)
    ok = await cp.rpc(a, "prompt.submit", {"session_id": sa, "text": "mine"})
    assert ok.ok
    await a.next_event("message.complete", timeout=10)
    other = await cp.rpc(b, "prompt.submit", {"session_id": sb, "text": "b"})
    assert other.ok
    await b.next_event("message.complete", timeout=10)
    assert {e.get("session_id") for e in a.events} == {sa}
    assert {e.get("session_id") for e in b.events} == {sb}
    await cp.close_channel(a)
    await cp.close_channel(b)


async def test_cleanup_channel_only_stops(world: World) -> None:
    ch = await world.channel(cleanup_only=True)
    out = await world.cp.rpc(ch, "session.create", {"profile": "default"})
    assert out.code == "runner_cleanup_forbidden"
    assert world.hermes.effects.count("session.created") == 0


async def test_close_interrupts_running_session_fast(session: Session) -> None:
    """Order, not duration: the running session is interrupted, and only then is the socket
    closed (the ≤ 3 s budget in real time is the one slow case below)."""
    cp, ch, sid, hermes = session.cp, session.ch, session.sid, session.hermes
    await start_hang(cp, ch, sid)
    closed = await cp.close_channel(ch)
    assert closed.ok
    hit = await hermes.effects.wait_for("session.interrupted", timeout=5)
    assert hit.session_id == sid
    await hermes.effects.wait_for("ws.closed", timeout=5)
    assert before(hermes, "session.interrupted", "ws.closed", session_id=sid), \
        hermes.effects.kinds()


@pytest.mark.slow
async def test_close_within_3s_when_hermes_holds_the_interrupt(tmp_path: Path) -> None:
    """The one real-time case: a close whose interrupt Hermes never answers is still answered
    within the protocol's 3 s. A black box can show a duration only in real time.

    Tolerance: the close must take at least 2.5 s (it waited for the interrupt; the budget is
    3 s from the moment the runner received the close, and the command's delivery costs up to
    ~0.5 s of it) and less than 3.9 s (3 s budget + 0.9 s for the delivery, the result post and
    a loaded 2-core machine). Everything else here is asserted as order: the close is answered
    while Hermes still holds the interrupt at its pause point."""
    env = {"RUNNER_REF_TEST_INTERRUPT_WAIT": "3"}   # the protocol's own 3 s budget
    async with ScriptedHermes(SCRIPT) as hermes, rig(tmp_path, hermes.url, env=env) as r:
        cp = r.cp
        ch = await cp.open_channel(r.runner_id, account="alice", profile="default")
        sid = await create_session(cp, ch)
        await start_hang(cp, ch, sid)
        pause = hermes.pause_at("before session.interrupt")   # Hermes never answers in time
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        closed = await cp.close_channel(ch)
        elapsed = loop.time() - t0
        assert closed.ok and closed.result == {"ok": True}
        assert pause.hit is not None   # answered while Hermes holds the interrupt, unanswered
        assert hermes.effects.count("session.interrupted", session_id=sid) == 0
        assert 2.5 <= elapsed < 3.9, elapsed    # waited for the interrupt, but ≤ 3 s (+ slack)
        await pause.reached(timeout=1)
        await hermes.effects.wait_for("ws.closed", timeout=5)
        pause.release()


async def test_slow_rpc_never_blocks_close(session: Session) -> None:
    cp, ch, sid, hermes = session.cp, session.ch, session.sid, session.hermes
    pause = hermes.pause_at("before session.usage")
    slow = await cp.submit_rpc(ch, "session.usage", {"session_id": sid})
    await pause.reached(timeout=10)
    closed = await asyncio.wait_for(cp.close_channel(ch), 5)   # overtakes the held RPC
    assert closed.ok
    pause.release()
    late = await slow
    assert not late.ok


async def test_slow_rpc_never_delays_an_interrupt(session: Session) -> None:
    cp, ch, sid, hermes = session.cp, session.ch, session.sid, session.hermes
    await start_hang(cp, ch, sid)
    pause = hermes.pause_at("before session.usage")
    slow = await cp.submit_rpc(ch, "session.usage", {"session_id": sid})
    await pause.reached(timeout=10)
    stop = await asyncio.wait_for(
        cp.rpc(ch, "session.interrupt", {"session_id": sid}), 5)   # overtakes the held RPC
    assert stop.ok, stop
    await hermes.effects.wait_for("session.interrupted", timeout=5, session_id=sid)
    assert not slow.done()        # the slow command is still held at its pause point
    pause.release()
    assert (await slow).ok
    await cp.close_channel(ch)


async def test_410_closes_only_that_channel(world: World) -> None:
    cp, hermes, r = world.cp, world.hermes, world.r
    a = await world.channel()
    b = await world.channel()
    sa = await create_session(cp, a)
    sb = await create_session(cp, b)
    assert (await cp.rpc(a, "prompt.submit", {"session_id": sa, "text": "STREAM"})).ok
    await a.next_event("message.delta", timeout=10)
    cp.revoke_channel(a)
    await asyncio.wait_for(a.closed.wait(), 10)
    await hermes.effects.wait_for("session.interrupted", timeout=5, session_id=sa)
    out = await cp.rpc(b, "prompt.submit", {"session_id": sb, "text": "still here"})
    assert out.ok
    await b.next_event("message.complete", timeout=10)
    assert r.cp.is_online(r.runner_id)
    assert hermes.effects.count("session.interrupted", session_id=sb) == 0  # no stray interrupt
    assert not b.closed.is_set()


async def test_epoch_change_drops_channels(session: Session) -> None:
    cp, hermes, r = session.cp, session.hermes, session.r
    old = cp.epoch(r.runner_id)
    await cp.force_watchdog(r.runner_id)
    await cp.wait_epoch_change(r.runner_id, old, timeout=10)
    await hermes.effects.wait_for("ws.closed", timeout=10)
    fresh = await cp.open_channel(r.runner_id, account="alice", profile="default")
    assert await create_session(cp, fresh)


async def test_hermes_closing_the_socket_posts_closed(session: Session) -> None:
    ch, hermes, r = session.ch, session.hermes, session.r
    await hermes.stop()
    await asyncio.wait_for(ch.closed.wait(), 10)
    assert ch.closed_by == "runner"
    assert r.cp.is_online(r.runner_id)


async def test_close_overtaking_open_leaves_no_socket(world: World) -> None:
    cp, hermes, r = world.cp, world.hermes, world.r
    for _ in range(5):
        ch, opening = await cp.submit_open_channel(r.runner_id, account="alice",
                                                   profile="default")
        closed = await cp.close_channel(ch)
        assert closed.ok
        await opening
    connected = hermes.effects.count("ws.connected")
    await hermes.effects.wait_for_count("ws.closed", connected, timeout=10)
    # and the ids are tomb-stoned: a reopen of the same id is refused
    again = await cp.open_channel(r.runner_id, account="alice", profile="default",
                                  connection_id=ch.connection_id, check=False)
    assert again.open_outcome is not None and not again.open_outcome.ok


async def test_sigterm_interrupts_running_sessions(session: Session) -> None:
    ch, sid, hermes, r = session.ch, session.sid, session.hermes, session.r
    await start_hang(r.cp, ch, sid)
    r.runner.signal(signal.SIGTERM)
    assert await r.runner.wait(10) == 0
    assert "stopped" in r.runner.stderr()
    hit = await hermes.effects.wait_for("session.interrupted", timeout=5)
    assert hit.session_id == sid
    await hermes.effects.wait_for("ws.closed", timeout=5)


async def test_event_post_failure_other_than_410_disconnects_the_runner(session: Session) -> None:
    cp, ch, sid, hermes, r = session.cp, session.ch, session.sid, session.hermes, session.r
    resets_before = sum(1 for ex in cp.history if ex.route == "poll" and ex.reset)
    old_epoch = cp.epoch(r.runner_id)
    cp.faults.fail_next("event", status=503, code="service_updating")
    # the prompt's own outcome races the disconnect (ok, or 503 runner_offline once the
    # reset poll dropped the runner's online state); what matters is what follows
    await cp.rpc(ch, "prompt.submit", {"session_id": sid, "text": "HANGTEST"})
    await hermes.effects.wait_for("ws.closed", timeout=10)   # local disconnect: channel gone
    await cp.wait_epoch_change(r.runner_id, old_epoch, timeout=10)   # after a reset poll
    resets = sum(1 for ex in cp.history if ex.route == "poll" and ex.reset)
    assert resets > resets_before, "no reset poll after the failed event post"


async def test_close_overtaking_a_prompt_reply_still_interrupts(session: Session) -> None:
    """A prompt whose reply has not come back yet counts as running: the close interrupts it."""
    cp, ch, sid, hermes = session.cp, session.ch, session.sid, session.hermes
    pause = hermes.pause_at("before prompt.submit")   # Hermes holds the request, no reply
    prompt = await cp.submit_rpc(ch, "prompt.submit", {"session_id": sid, "text": "HANGTEST"})
    await pause.reached(timeout=10)
    closing = asyncio.ensure_future(cp.close_channel(ch))
    await hermes.effects.wait_for("session.interrupted", timeout=5, session_id=sid)
    pause.release()
    assert (await asyncio.wait_for(closing, 10)).ok
    await prompt


async def test_session_info_behind_the_create_reply_reaches_the_channel(world: World) -> None:
    """The scripted Hermes sends ``session.info`` right behind the create reply (a real Hermes
    sends it 0.2–1.6 s later); every session's info reaches the control plane. Before ownership
    was registered in the reader, 1–2 of 5 were dropped (``test_gateway_unit.py`` makes that
    ordering certain in-process)."""
    ch = await world.channel()
    for _ in range(5):
        seen = len(ch.events)
        sid = await create_session(world.cp, ch)
        info = await ch.next_event("session.info", timeout=5, after=seen)
        assert info["session_id"] == sid, info
