"""Gateways through the runner process: fake control plane ⇄ runner_ref ⇄ scripted Hermes,
all on 127.0.0.1 sockets. Session flow, isolation, allowlists, close interrupts, a 410 closes
only its channel, an epoch change drops every channel."""
from __future__ import annotations

import asyncio
import signal
from pathlib import Path
from typing import Any

from integration import rig

from fixtures import ScriptedHermes

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


async def test_session_flow_events_and_close(tmp_path: Path) -> None:
    async with ScriptedHermes(SCRIPT) as hermes, rig(tmp_path, hermes.url) as r:
        cp = r.cp
        ch = await cp.open_channel(r.runner_id, account="alice", profile="default")
        sid = await create_session(cp, ch)
        out = await cp.rpc(ch, "prompt.submit", {"session_id": sid, "text": "hi"})
        assert out.ok and out.result == {"status": "streaming"}
        done = await ch.next_event("message.complete", timeout=10)
        assert done["session_id"] == sid and "PONG-42" in done["payload"]["text"]
        assert all(e.get("session_id") == sid for e in ch.events)
        assert hermes.effects.count("prompt.accepted") == 1
        listed = await cp.rpc(ch, "session.active_list",
                              {"profile": "default", "current_session_id": sid})
        assert listed.ok and [s["id"] for s in listed.result["sessions"]] == [sid]
        bad = await cp.rpc(ch, "session.active_list", {"current_session_id": sid})
        assert bad.code == "runner_session_forbidden"
        closed = await cp.close_channel(ch)
        assert closed.ok and closed.result == {"ok": True}
        await hermes.effects.wait_for("ws.closed", timeout=5)


async def test_session_isolation_and_allowlist(tmp_path: Path) -> None:
    async with ScriptedHermes(SCRIPT) as hermes, rig(tmp_path, hermes.url) as r:
        cp = r.cp
        a = await cp.open_channel(r.runner_id, account="alice", profile="default")
        b = await cp.open_channel(r.runner_id, account="alice", profile="default")
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


async def test_cleanup_channel_only_stops(tmp_path: Path) -> None:
    async with ScriptedHermes(SCRIPT) as hermes, rig(tmp_path, hermes.url) as r:
        ch = await r.cp.open_channel(r.runner_id, account="alice", profile="default",
                                     cleanup_only=True)
        out = await r.cp.rpc(ch, "session.create", {"profile": "default"})
        assert out.code == "runner_cleanup_forbidden"
        assert hermes.effects.count("session.created") == 0


async def test_close_interrupts_running_session_fast(tmp_path: Path) -> None:
    async with ScriptedHermes(SCRIPT) as hermes, rig(tmp_path, hermes.url) as r:
        cp = r.cp
        ch = await cp.open_channel(r.runner_id, account="alice", profile="default")
        sid = await create_session(cp, ch)
        await start_hang(cp, ch, sid)
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        closed = await cp.close_channel(ch)
        assert closed.ok
        assert loop.time() - t0 < 3.5
        hit = await hermes.effects.wait_for("session.interrupted", timeout=5)
        assert hit.session_id == sid


async def test_close_within_3s_when_hermes_holds_the_interrupt(tmp_path: Path) -> None:
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
        assert 2.5 <= elapsed < 3.9, elapsed    # waited for the interrupt, but ≤ 3 s (+ slack)
        await pause.reached(timeout=1)
        await hermes.effects.wait_for("ws.closed", timeout=5)
        pause.release()


async def test_slow_rpc_never_blocks_close(tmp_path: Path) -> None:
    async with ScriptedHermes(SCRIPT) as hermes, rig(tmp_path, hermes.url) as r:
        cp = r.cp
        ch = await cp.open_channel(r.runner_id, account="alice", profile="default")
        sid = await create_session(cp, ch)
        pause = hermes.pause_at("before session.usage")
        slow = await cp.submit_rpc(ch, "session.usage", {"session_id": sid})
        await pause.reached(timeout=10)
        closed = await asyncio.wait_for(cp.close_channel(ch), 5)   # overtakes the held RPC
        assert closed.ok
        pause.release()
        late = await slow
        assert not late.ok


async def test_slow_rpc_never_delays_an_interrupt(tmp_path: Path) -> None:
    async with ScriptedHermes(SCRIPT) as hermes, rig(tmp_path, hermes.url) as r:
        cp = r.cp
        ch = await cp.open_channel(r.runner_id, account="alice", profile="default")
        sid = await create_session(cp, ch)
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


async def test_410_closes_only_that_channel(tmp_path: Path) -> None:
    async with ScriptedHermes(SCRIPT) as hermes, rig(tmp_path, hermes.url) as r:
        cp = r.cp
        a = await cp.open_channel(r.runner_id, account="alice", profile="default")
        b = await cp.open_channel(r.runner_id, account="alice", profile="default")
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


async def test_epoch_change_drops_channels(tmp_path: Path) -> None:
    async with ScriptedHermes(SCRIPT) as hermes, rig(tmp_path, hermes.url) as r:
        cp = r.cp
        ch = await cp.open_channel(r.runner_id, account="alice", profile="default")
        await create_session(cp, ch)
        old = cp.epoch(r.runner_id)
        await cp.force_watchdog(r.runner_id)
        await cp.wait_epoch_change(r.runner_id, old, timeout=10)
        await hermes.effects.wait_for("ws.closed", timeout=10)
        fresh = await cp.open_channel(r.runner_id, account="alice", profile="default")
        assert await create_session(cp, fresh)


async def test_hermes_closing_the_socket_posts_closed(tmp_path: Path) -> None:
    async with ScriptedHermes(SCRIPT) as hermes, rig(tmp_path, hermes.url) as r:
        ch = await r.cp.open_channel(r.runner_id, account="alice", profile="default")
        await create_session(r.cp, ch)
        await hermes.stop()
        await asyncio.wait_for(ch.closed.wait(), 10)
        assert ch.closed_by == "runner"
        assert r.cp.is_online(r.runner_id)


async def test_close_overtaking_open_leaves_no_socket(tmp_path: Path) -> None:
    async with ScriptedHermes(SCRIPT) as hermes, rig(tmp_path, hermes.url) as r:
        cp = r.cp
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


async def test_sigterm_interrupts_running_sessions(tmp_path: Path) -> None:
    async with ScriptedHermes(SCRIPT) as hermes, rig(tmp_path, hermes.url) as r:
        ch = await r.cp.open_channel(r.runner_id, account="alice", profile="default")
        sid = await create_session(r.cp, ch)
        await start_hang(r.cp, ch, sid)
        r.runner.signal(signal.SIGTERM)
        assert await r.runner.wait(10) == 0
        assert "stopped" in r.runner.stderr()
        hit = await hermes.effects.wait_for("session.interrupted", timeout=5)
        assert hit.session_id == sid
        await hermes.effects.wait_for("ws.closed", timeout=5)


async def test_event_post_failure_other_than_410_disconnects_the_runner(tmp_path: Path) -> None:
    async with ScriptedHermes(SCRIPT) as hermes, rig(tmp_path, hermes.url) as r:
        cp = r.cp
        ch = await cp.open_channel(r.runner_id, account="alice", profile="default")
        sid = await create_session(cp, ch)
        resets_before = sum(1 for ex in cp.history if ex.route == "poll" and ex.reset)
        cp.faults.fail_next("event", status=503, code="service_updating")
        # the prompt's own outcome races the disconnect (ok, or 503 runner_offline once the
        # reset poll dropped the runner's online state); what matters is what follows
        await cp.rpc(ch, "prompt.submit", {"session_id": sid, "text": "HANGTEST"})
        await hermes.effects.wait_for("ws.closed", timeout=10)   # local disconnect: channel gone
        loop = asyncio.get_running_loop()
        end = loop.time() + 10
        while sum(1 for ex in cp.history if ex.route == "poll" and ex.reset) <= resets_before:
            assert loop.time() < end, "no reset poll after the failed event post"
            await asyncio.sleep(0.02)


async def test_close_overtaking_a_prompt_reply_still_interrupts(tmp_path: Path) -> None:
    """A prompt whose reply has not come back yet counts as running: the close interrupts it."""
    async with ScriptedHermes(SCRIPT) as hermes, rig(tmp_path, hermes.url) as r:
        cp = r.cp
        ch = await cp.open_channel(r.runner_id, account="alice", profile="default")
        sid = await create_session(cp, ch)
        pause = hermes.pause_at("before prompt.submit")   # Hermes holds the request, no reply
        prompt = await cp.submit_rpc(ch, "prompt.submit", {"session_id": sid, "text": "HANGTEST"})
        await pause.reached(timeout=10)
        closing = asyncio.ensure_future(cp.close_channel(ch))
        await hermes.effects.wait_for("session.interrupted", timeout=5, session_id=sid)
        pause.release()
        assert (await asyncio.wait_for(closing, 10)).ok
        await prompt
