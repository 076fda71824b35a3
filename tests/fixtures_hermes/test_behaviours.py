"""The scripted Hermes' opt-in wire behaviours (``script.BEHAVIOURS``) and ``change_password``:
each is off by default (the 0.19.0 behaviour stays) and does what it says when switched on."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import struct
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
import pytest_asyncio

from fixtures import ScriptedHermes
from fixtures.hermes.client import GatewayClient
from fixtures.hermes.script import Script, ScriptError

WAIT = 5.0


@pytest_asyncio.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as s:
        yield s


# -- session_info_same_write: a raw socket shows what one read returns -----------------------

def _frames(buf: bytes) -> tuple[list[dict[str, Any]], bytes]:
    """Complete unmasked server text frames at the start of ``buf`` (parsed), and the rest."""
    out: list[dict[str, Any]] = []
    while len(buf) >= 2:
        n, at = buf[1] & 0x7F, 2
        if n == 126:
            if len(buf) < 4:
                break
            n, at = struct.unpack("!H", buf[2:4])[0], 4
        elif n == 127:
            if len(buf) < 10:
                break
            n, at = struct.unpack("!Q", buf[2:10])[0], 10
        if len(buf) < at + n:
            break
        out.append(json.loads(buf[at:at + n]))
        buf = buf[at + n:]
    return out, buf


def _masked_text(text: str) -> bytes:
    data, mask = text.encode(), os.urandom(4)
    head = bytes([0x81, 0x80 | len(data)]) if len(data) < 126 else \
        bytes([0x81, 0x80 | 126]) + struct.pack("!H", len(data))
    return head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(data))


async def _reads_of_create(h: ScriptedHermes) -> list[list[dict[str, Any]]]:
    """Open /api/ws on a raw socket (no compression), send session.create, and return the
    frames that each read completed, up to the one that completes the session.info."""
    reader, writer = await asyncio.open_connection(h.host, h.port)
    key = base64.b64encode(os.urandom(16)).decode()
    writer.write((f"GET /api/ws?token={h.session_token} HTTP/1.1\r\nHost: {h.host}:{h.port}\r\n"
                  "Upgrade: websocket\r\nConnection: Upgrade\r\n"
                  f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n").encode())
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), WAIT)
    assert head.startswith(b"HTTP/1.1 101"), head[:80]
    buf = b""
    while not any(f.get("params", {}).get("type") == "gateway.ready" for f in _frames(buf)[0]):
        buf += await asyncio.wait_for(reader.read(65536), WAIT)
    _, buf = _frames(buf)
    writer.write(_masked_text(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "session.create",
                                          "params": {"cols": 80}})))
    reads: list[list[dict[str, Any]]] = []
    try:
        while not any(f.get("params", {}).get("type") == "session.info" for r in reads for f in r):
            buf += await asyncio.wait_for(reader.read(65536), WAIT)
            done, buf = _frames(buf)
            reads.append(done)
    finally:
        writer.close()
    return reads


def _kinds(reads: list[list[dict[str, Any]]]) -> list[list[str]]:
    return [["reply" if "id" in f else f["params"]["type"] for f in r] for r in reads]


async def test_same_write_puts_reply_and_info_in_one_read() -> None:
    script = {"session_info_same_write": True}
    async with ScriptedHermes(script) as h:
        for _ in range(10):   # one read every time, not by luck
            reads = [r for r in await _reads_of_create(h) if r]
            assert _kinds(reads) == [["reply", "session.info"]], _kinds(reads)


async def test_default_sends_reply_and_info_as_two_writes() -> None:
    # With a delay the two frames can only arrive in two reads: the default path is two writes.
    async with ScriptedHermes({"session_info_delay": 0.05}) as h:
        reads = [r for r in await _reads_of_create(h) if r]
        assert _kinds(reads) == [["reply"], ["session.info"]], _kinds(reads)


async def test_same_write_keeps_pause_points_and_applies_to_resume(
        http: aiohttp.ClientSession) -> None:
    async with ScriptedHermes({"session_info_same_write": True}) as h:
        c = await GatewayClient.connect(http, h.ws_url)
        pause = h.pause_at("before session.info")
        task = asyncio.ensure_future(c.request("session.create", {"cols": 80}))
        await pause.reached(timeout=WAIT)
        assert not task.done()   # the reply waits with its session.info
        pause.release()
        sid = (await asyncio.wait_for(task, WAIT))["result"]["session_id"]
        await c.event("session.info", session_id=sid, timeout=WAIT)
        stored = h.add_stored_session(messages=[{"role": "user", "text": "hi"}])
        r = await c.request("session.resume", {"session_id": stored, "cols": 80})
        await c.event("session.info", session_id=r["result"]["session_id"], timeout=WAIT)


def test_behaviours_are_validated() -> None:
    assert not Script.load({}).has("session_info_same_write")
    assert Script.load({"broadcast_events": True}).has("broadcast_events")
    assert not Script.load({"broadcast_events": False}).has("broadcast_events")
    with pytest.raises(ScriptError, match="true or false"):
        Script.load({"http_set_cookie": 1})
    with pytest.raises(ScriptError, match="session_info_delay 0"):
        Script.load({"session_info_same_write": True, "session_info_delay": 0.5})
    data = Script.bundled("slow", broadcast_events=True)
    assert data["broadcast_events"] is True and Script.load(data).rules
    with pytest.raises(ScriptError):
        Script.bundled("no-such-script")


# -- broadcast_events ---------------------------------------------------------------------------

@pytest.mark.parametrize("on", [False, True])
async def test_broadcast_events_reach_other_sockets(on: bool, http: aiohttp.ClientSession) -> None:
    async with ScriptedHermes({"broadcast_events": on}) as h:
        a = await GatewayClient.connect(http, h.ws_url)
        b = await GatewayClient.connect(http, h.ws_url)
        sid = (await a.request("session.create", {"cols": 80}))["result"]["session_id"]
        await a.request("prompt.submit", {"session_id": sid, "text": "hi"})
        await a.event("message.complete", session_id=sid, timeout=WAIT)
        if on:
            await b.event("message.complete", session_id=sid, timeout=WAIT)
        # a frame b's own session sends afterwards proves b has read everything before it
        own = (await b.request("session.create", {"cols": 80}))["result"]["session_id"]
        await b.event("session.info", session_id=own, timeout=WAIT)
        seen = set(b.events(sid))
        assert ("message.complete" in seen) is on, seen
        if on:   # and the other way round
            await a.event("session.info", session_id=own, timeout=WAIT)


# -- http_set_cookie ---------------------------------------------------------------------------

@pytest.mark.parametrize("on", [False, True])
async def test_http_set_cookie(on: bool, http: aiohttp.ClientSession) -> None:
    async with ScriptedHermes({"http_set_cookie": on}) as h:
        async with http.get(h.url + "/api/status") as resp:
            cookie = resp.headers.get("Set-Cookie")
        async with http.get(h.url + "/api/config", headers=h.auth_headers) as resp:
            second = resp.headers.get("Set-Cookie")
        if not on:
            assert cookie is None and second is None and not h.core.minted
            return
        assert cookie and second and cookie != second
        values = {c.split(";", 1)[0].split("=", 1)[1] for c in (cookie, second)}
        assert values == h.core.minted and values <= h.secrets
        async with http.get(h.url + "/") as resp:   # the page is not /api/*
            assert "Set-Cookie" not in resp.headers


# -- change_password ---------------------------------------------------------------------------

async def test_change_password_refuses_the_old_login() -> None:
    async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as http, \
            ScriptedHermes(auth="account") as h:
        old = h.password
        login = {"provider": "basic", "username": h.username, "password": old}
        async with http.post(h.url + "/auth/password-login", json=login) as resp:
            assert resp.status == 200
        async with http.get(h.url + "/api/config") as resp:
            assert resp.status == 200   # the cookie works
        new = h.change_password()
        assert new != old and h.password == new and old in h.secrets and new in h.secrets
        async with http.get(h.url + "/api/config") as resp:
            assert resp.status == 401   # every cookie is void
        async with http.post(h.url + "/auth/password-login", json=login) as resp:
            assert resp.status == 401
        assert h.effects.of("auth.rejected")[-1].detail["reason"] == "bad_credentials"
        async with http.post(h.url + "/auth/password-login",
                             json={**login, "password": new}) as resp:
            assert resp.status == 200
    async with ScriptedHermes() as token_mode:
        with pytest.raises(ValueError):
            token_mode.change_password()


# -- long_rpc_errors -----------------------------------------------------------------------------

@pytest.mark.parametrize("on", [False, True])
async def test_long_rpc_errors(on: bool, http: aiohttp.ClientSession) -> None:
    async with ScriptedHermes({"long_rpc_errors": on}) as h:
        c = await GatewayClient.connect(http, h.ws_url)
        sid = (await c.request("session.create", {"cols": 80}))["result"]["session_id"]
        err = (await c.request("session.steer", {"session_id": sid}))["error"]
        assert err["code"] == 4002 and err["message"].startswith("text is required")
        assert len(err["message"]) == (5000 if on else len("text is required"))
        ok = await c.request("session.usage", {"session_id": sid})
        assert "result" in ok   # replies without an error are untouched


# -- active_list_without_list --------------------------------------------------------------------

@pytest.mark.parametrize("on", [False, True])
async def test_active_list_without_list(on: bool, http: aiohttp.ClientSession) -> None:
    async with ScriptedHermes({"active_list_without_list": on}) as h:
        c = await GatewayClient.connect(http, h.ws_url)
        sid = (await c.request("session.create", {"cols": 80}))["result"]["session_id"]
        result = (await c.request("session.active_list", {"current_session_id": sid}))["result"]
        if on:
            assert result == {}
        else:
            assert [r["id"] for r in result["sessions"]] == [sid]


# -- new_stored_id (on demand) -------------------------------------------------------------------

async def test_new_stored_id_announces_the_new_id(http: aiohttp.ClientSession) -> None:
    async with ScriptedHermes() as h:
        c = await GatewayClient.connect(http, h.ws_url)
        res = (await c.request("session.create", {"cols": 80}))["result"]
        sid, old = res["session_id"], res["stored_session_id"]
        new = await h.new_stored_id(sid)
        assert new != old and new in h.stored_sessions
        frame = await c.wait(lambda f: f.get("method") == "event"
                             and f["params"].get("type") == "session.info"
                             and (f["params"].get("payload") or {}).get("stored_session_id") == new,
                             WAIT)
        assert frame["params"]["session_id"] == sid
        assert h.effects.of("session.stored_changed", session_id=sid)[0].detail["previous"] == old
