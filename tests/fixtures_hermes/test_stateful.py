"""Hypothesis stateful test: sessions, sockets and turns keep the effect log's promises."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import aiohttp
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    consumes,
    invariant,
    precondition,
    rule,
)

from fixtures import ScriptedHermes
from fixtures.hermes.client import GatewayClient
from tests.budget import examples

SCRIPT = {"rules": [{"name": "hang", "match": {"prefix": "HANG"},
                     "steps": [{"say": "part"}, {"wait": "interrupt"}]}]}


class SessionMachine(RuleBasedStateMachine):
    """Rules are things clients do; invariants are the fixture's promises."""

    sockets = Bundle("sockets")
    sessions = Bundle("sessions")

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        # one counter for the harness and the fixture: request ids are drawn from it just
        # before sending, effects take their seq from it, so "cause before effect" is checkable
        self.seq = itertools.count(1).__next__
        self.sent: dict[int, str] = {}  # request id -> socket id it was sent on
        self.hermes = ScriptedHermes(SCRIPT, time_scale=0, sequence=self.seq)
        self.http: aiohttp.ClientSession = self.run(self._start())
        self.open: dict[int, GatewayClient] = {}
        self.n = 0
        self.cod: dict[str, int] = {}  # live id -> socket key, for close_on_disconnect sessions
        self.hanging: set[str] = set()

    def run(self, coro: Any) -> Any:
        return self.loop.run_until_complete(asyncio.wait_for(coro, 10))

    def request(self, sock: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
        rid = self.seq()
        self.sent[rid] = f"ws{sock}"
        reply: dict[str, Any] = self.run(self.open[sock].request(method, params, rid=rid))
        return reply

    async def _start(self) -> aiohttp.ClientSession:
        await self.hermes.start()
        return aiohttp.ClientSession()

    @rule(target=sockets)
    def connect(self) -> int:
        self.n += 1
        self.open[self.n] = self.run(GatewayClient.connect(self.http, self.hermes.ws_url))
        return self.n

    @rule(target=sessions, sock=sockets, cod=st.booleans())
    def create(self, sock: int, cod: bool) -> str:
        c = self.open.get(sock)
        if c is None:
            return ""
        r = self.request(sock, "session.create", {"close_on_disconnect": cod})
        sid = str(r["result"]["session_id"])
        if cod:
            self.cod[sid] = sock
        return sid

    @rule(sid=sessions, sock=sockets, hang=st.booleans())
    def prompt(self, sid: str, sock: int, hang: bool) -> None:
        c = self.open.get(sock)
        if c is None or not sid or sid in self.hanging:
            return
        start = len(c.received)
        r = self.request(sock, "prompt.submit", {"session_id": sid,
                                                 "text": "HANG" if hang else "hi"})
        if "error" in r:
            assert sid not in self.hermes.live_sessions
            return
        if sid in self.cod:
            self.cod[sid] = sock  # events (and ownership) follow the prompting socket
        if hang:
            self.run(c.event("message.delta", session_id=sid, start=start))
            self.hanging.add(sid)
        else:
            self.run(c.event("message.complete", session_id=sid, start=start))

    @rule(sid=sessions, sock=sockets)
    def interrupt(self, sid: str, sock: int) -> None:
        c = self.open.get(sock)
        if c is None or not sid:
            return
        r = self.request(sock, "session.interrupt", {"session_id": sid})
        if "result" in r and sid in self.hanging:
            self.run(self.hermes.effects.wait_for("turn.finished", session_id=sid,
                                                  status="interrupted"))
            self.hanging.discard(sid)

    @rule(sid=consumes(sessions), sock=sockets)
    def close(self, sid: str, sock: int) -> None:
        c = self.open.get(sock)
        if c is None or not sid:
            return
        was_live = sid in self.hermes.live_sessions
        r = self.request(sock, "session.close", {"session_id": sid})
        assert r["result"]["closed"] is was_live
        assert self.hermes.effects.count("session.closed", session_id=sid) == 1
        self.hanging.discard(sid)

    @precondition(lambda self: bool(self.open))
    @rule(sock=consumes(sockets))
    def disconnect(self, sock: int) -> None:
        c = self.open.pop(sock, None)
        if c is None:
            return
        self.run(c.close())
        self.run(self.hermes.effects.wait_for("ws.closed", socket_id=f"ws{sock}"))
        for sid, owner in list(self.cod.items()):
            if owner == sock:
                assert sid not in self.hermes.live_sessions, "close_on_disconnect kept alive"
                self.hanging.discard(sid)

    @invariant()
    def closed_at_most_once_and_never_live(self) -> None:
        eff = self.hermes.effects
        for e in eff.of("session.closed"):
            assert eff.count("session.closed", session_id=e.session_id) == 1
            assert e.session_id not in self.hermes.live_sessions

    @invariant()
    def every_accepted_prompt_finishes_once(self) -> None:
        eff = self.hermes.effects
        for e in eff.of("prompt.accepted"):
            n = eff.count("turn.finished", session_id=e.session_id)
            assert n <= eff.count("prompt.accepted", session_id=e.session_id)
        for sid in self.hermes.live_sessions:
            running = 1 if self.hermes.live_sessions[sid].running else 0
            assert (eff.count("prompt.accepted", session_id=sid)
                    == eff.count("turn.finished", session_id=sid) + running)

    @invariant()
    def effects_follow_their_cause(self) -> None:
        """Every effect a request caused names that request and its socket, and comes after it
        on the shared sequence (turn effects name the prompt.submit that started the turn)."""
        for e in self.hermes.effects.entries:
            c = e.cause
            assert c is not None, e
            if c.transport == "rpc":
                assert self.sent.get(c.request_id) == c.socket_id, e
                assert e.seq > c.request_id, e
            else:
                assert c.transport == "ws" and c.path == "/api/ws", e

    def teardown(self) -> None:
        async def stop() -> None:
            for c in self.open.values():
                await c.close()
            await self.hermes.stop()
            await self.http.close()
        self.run(stop())
        self.loop.close()


SessionMachine.TestCase.settings = settings(max_examples=examples(ci=15), stateful_step_count=12)
TestSessionMachine = SessionMachine.TestCase
