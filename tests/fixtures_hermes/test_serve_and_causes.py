"""Serve mode, the session.info delay in both orders, effect causes, the shared sequence, secrets."""

from __future__ import annotations

import asyncio
import itertools
import re
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
import pytest_asyncio

from fixtures import Script, ScriptedHermes, ScriptError
from fixtures.hermes.client import GatewayClient

TOKEN_IN_PAGE = re.compile(r'window\.__HERMES_SESSION_TOKEN__="([^"]*)"')


@pytest_asyncio.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as s:
        yield s


class HeldSleep:
    """An injectable ``sleep`` that returns only when the test says so (no wall time)."""

    def __init__(self) -> None:
        self.asked: list[float] = []
        self.called = asyncio.Event()
        self._go = asyncio.Event()

    async def __call__(self, seconds: float) -> None:
        self.asked.append(seconds)
        self.called.set()
        await self._go.wait()

    def release(self) -> None:
        self._go.set()


def _is_event(f: dict[str, Any], etype: str, sid: str) -> bool:
    p = f.get("params") or {}
    return f.get("method") == "event" and p.get("type") == etype and p.get("session_id") == sid


# -- serve mode -------------------------------------------------------------------------------
async def test_serve_mode_index_is_404_and_embeds_no_token(http: aiohttp.ClientSession) -> None:
    async with ScriptedHermes(mode="serve", session_token="s" * 32) as h:
        async with http.get(h.url + "/") as r:
            body = await r.text()
            assert r.status == 404
        assert "Headless backend (hermes serve)" in body
        assert TOKEN_IN_PAGE.search(body) is None and "s" * 32 not in body
        async with http.get(h.url + "/api/status") as r:
            assert (await r.json())["auth_required"] is False
        async with http.get(h.url + "/api/profiles") as r:  # a runner that found no token
            assert r.status == 401
        async with http.get(h.url + "/api/profiles", headers=h.auth_headers) as r:
            assert r.status == 200  # a runner handed the token
    async with ScriptedHermes(mode="dashboard", session_token="d" * 32) as h:
        async with http.get(h.url + "/") as r:
            m = TOKEN_IN_PAGE.search(await r.text())
        assert m is not None and m.group(1) == "d" * 32
    with pytest.raises(ValueError):
        ScriptedHermes(mode="headless")  # type: ignore[arg-type]


# -- the session.info delay -------------------------------------------------------------------
async def test_session_info_right_behind_the_reply_by_default(http: aiohttp.ClientSession) -> None:
    async with ScriptedHermes() as h:
        c = await GatewayClient.connect(http, h.ws_url)
        r = await c.request("session.create", {}, rid=1)
        sid = r["result"]["session_id"]
        await c.event("session.info", session_id=sid)
        i = c.received.index(r)
        assert _is_event(c.received[i + 1], "session.info", sid)  # next frame on the wire
        await c.request("prompt.submit", {"session_id": sid, "text": "hi"})
        await c.event("message.complete", session_id=sid)
        stored = r["result"]["stored_session_id"]
        await c.request("session.close", {"session_id": sid})
        r = await c.request("session.resume", {"session_id": stored}, rid=2)
        new = r["result"]["session_id"]
        await c.event("session.info", session_id=new)
        assert _is_event(c.received[c.received.index(r) + 1], "session.info", new)
        await c.close()


async def test_session_info_after_a_scripted_delay(http: aiohttp.ClientSession) -> None:
    sleep = HeldSleep()
    script = {"session_info_delay": 0.7}
    async with ScriptedHermes(script, sleep=sleep, time_scale=2.0) as h:
        c = await GatewayClient.connect(http, h.ws_url)
        r = await c.request("session.create", {}, rid=1)
        sid = r["result"]["session_id"]
        await asyncio.wait_for(sleep.called.wait(), 5)
        assert sleep.asked == [1.4]  # delay × time_scale
        usage = await c.request("session.usage", {"session_id": sid}, rid=2)
        assert not any(_is_event(f, "session.info", sid) for f in c.received)
        sleep.release()
        info = await c.event("session.info", session_id=sid)
        order = [c.received.index(f) for f in (r, usage, info)]
        assert order == sorted(order)  # reply, another reply, then the late session.info
        await c.close()


async def test_delayed_session_info_is_dropped_for_a_closed_session(
        http: aiohttp.ClientSession) -> None:
    sleep = HeldSleep()
    async with ScriptedHermes({"session_info_delay": 1}, sleep=sleep) as h:
        c = await GatewayClient.connect(http, h.ws_url)
        sid = (await c.request("session.create", {}))["result"]["session_id"]
        await asyncio.wait_for(sleep.called.wait(), 5)
        await c.request("session.close", {"session_id": sid})
        sleep.release()
        await h.effects.wait_for("session.closed", session_id=sid)
        last = await c.request("session.list", {})  # a round trip after the release
        assert not any(_is_event(f, "session.info", sid) for f in c.received[:c.received.index(last)])
        await c.close()


def test_session_info_delay_range_is_seeded_and_validated() -> None:
    import random
    script = Script.load({"session_info_delay": [0.2, 1.6]})
    a = [script.session_info_delay(random.Random(5)) for _ in range(2)]
    assert a[0] == a[1] and 0.2 <= a[0] <= 1.6
    assert Script.load({}).session_info_delay(random.Random(5)) == 0.0
    for bad in [-1, [2, 1], [0.1], "1", True, None]:
        with pytest.raises(ScriptError):
            Script.load({"session_info_delay": bad})


# -- causes and the shared sequence -----------------------------------------------------------
async def test_effects_name_their_cause(tmp_path: Any, http: aiohttp.ClientSession) -> None:
    (tmp_path / "a.txt").write_text("x")
    async with ScriptedHermes("tool", time_scale=0) as h:
        async with http.get(h.url + "/api/files/download",
                            params={"path": str(tmp_path / "a.txt"), "token": h.session_token}):
            pass
        read = h.effects.of("file.read")[0]
        assert read.cause is not None and read.cause.transport == "http"
        assert (read.cause.method, read.cause.path) == ("GET", "/api/files/download")
        assert read.cause.query == {"path": str(tmp_path / "a.txt"), "token": "<redacted>"}
        assert read.cause.connection is not None and read.cause.connection.startswith("127.0.0.1:")
        c = await GatewayClient.connect(http, h.ws_url)
        created = await c.request("session.create", {}, rid="create-1")
        sid = created["result"]["session_id"]
        await c.request("prompt.submit", {"session_id": sid, "text": "TOOLTEST"}, rid=77)
        await c.event("message.complete", session_id=sid)
        eff = h.effects.of("session.created")[0]
        assert eff.cause is not None
        assert (eff.cause.transport, eff.cause.method, eff.cause.request_id,
                eff.cause.socket_id) == ("rpc", "session.create", "create-1", "ws1")
        for kind in ("prompt.accepted", "tool.executed", "turn.finished"):  # the turn's effects
            e = h.effects.of(kind, session_id=sid)[0]
            assert e.cause is not None and (e.cause.method, e.cause.request_id) == (
                "prompt.submit", 77), kind
        joined = h.effects.of(where=lambda e: e.cause is not None and e.cause.request_id == 77)
        assert [e.kind for e in joined] == ["prompt.accepted", "tool.executed", "turn.finished"]
        connected = h.effects.of("ws.connected")[0]
        assert connected.cause is not None and connected.cause.query == {"token": "<redacted>"}
        assert h.session_token not in h.effects.to_jsonl()
        await c.close()


async def test_shared_sequence_orders_harness_and_effects(http: aiohttp.ClientSession) -> None:
    seq = itertools.count(1).__next__
    async with ScriptedHermes(sequence=seq) as h:
        before = seq()  # the harness's own entry, e.g. a control-plane admit
        c = await GatewayClient.connect(http, h.ws_url)
        await c.request("session.create", {})
        after = seq()
        seqs = [e.seq for e in h.effects.entries]
        assert seqs and all(before < s < after for s in seqs)
        assert seqs == sorted(set(seqs))
        assert h.effects.of(after_seq=seqs[0]) == h.effects.entries[1:]
        await c.close()
    async with ScriptedHermes() as h:  # default: its own counter from 1
        c = await GatewayClient.connect(http, h.ws_url)
        await c.close()
        await h.effects.wait_for("ws.closed")
        assert [e.seq for e in h.effects.entries] == [1, 2]


async def test_secrets_lists_every_secret_minted_or_handed(http: aiohttp.ClientSession) -> None:
    async with ScriptedHermes(auth="account", password="pw-secret-2", session_token="t" * 32) as h:
        assert h.secrets == {"t" * 32, "pw-secret-2"}
        async with http.post(h.url + "/api/auth/login",
                             json={"username": "hermes", "password": "pw-secret-2"}) as r:
            cookie = r.cookies["hermes_session_at"].value
        async with http.post(h.url + "/api/auth/ws-ticket") as r:
            ticket = (await r.json())["ticket"]
        c = await GatewayClient.connect(http, f"{h.ws_url}?ticket={ticket}")
        sid = (await c.request("session.create", {}))["result"]
        bind = {"native_tools": True, "session_id": sid["session_id"],
                "stored_session_id": sid["stored_session_id"], "profile": "default",
                "generation": "g1", "bridge_url": "http://127.0.0.1:9", "token": "b" * 30,
                "expires_at": 1}
        async with http.post(h.url + "/api/plugins/yaoyao-bot-bridge/bind", json=bind) as r:
            assert r.status == 200
        assert h.secrets == {"t" * 32, "pw-secret-2", cookie, ticket, "b" * 30}
        log = h.effects.to_jsonl()
        assert not [s for s in h.secrets if s in log]
        await c.close()
