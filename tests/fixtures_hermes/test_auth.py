"""Auth like Hermes 0.19.0: token mode and account mode."""

from __future__ import annotations

import re

import aiohttp
import pytest

from fixtures import ScriptedHermes
from fixtures.hermes.client import GatewayClient

PUBLIC = ["/api/status", "/api/config/defaults", "/api/config/schema", "/api/model/info",
          "/api/dashboard/themes", "/api/dashboard/plugins"]


async def test_token_mode_http() -> None:
    async with ScriptedHermes(session_token="t" * 32) as h, aiohttp.ClientSession() as s:
        for path in PUBLIC:
            async with s.get(h.url + path) as r:
                assert r.status == 200, path
        async with s.get(h.url + "/api/status") as r:
            assert (await r.json())["auth_required"] is False
        async with s.get(h.url + "/api/profiles") as r:
            assert r.status == 401 and await r.json() == {"detail": "Unauthorized"}
        async with s.get(h.url + "/api/profiles", headers={"X-Hermes-Session-Token": "t" * 32}) as r:
            assert r.status == 200
        async with s.get(h.url + "/api/sessions", headers={"Authorization": "Bearer " + "t" * 32}) as r:
            assert r.status == 200
        async with s.get(h.url + "/api/sessions", headers={"X-Hermes-Session-Token": "x" * 32}) as r:
            assert r.status == 401
        async with s.get(h.url + "/api/status", headers={"Host": "evil.test"}) as r:
            assert r.status == 400 and "Invalid Host header" in (await r.json())["detail"]
        async with s.get(h.url + "/api/status", headers={"Host": f"localhost:{h.port}"}) as r:
            assert r.status == 200
        async with s.get(h.url + "/") as r:
            html = await r.text()
        m = re.search(r'window\.__HERMES_SESSION_TOKEN__="([^"]*)"', html)
        assert m and m.group(1) == "t" * 32
        assert re.fullmatch(r"[A-Za-z0-9_-]{20,4096}", m.group(1))
        assert not any("t" * 32 in repr(e) for e in h.effects.entries)


async def test_token_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HERMES_DASHBOARD_SESSION_TOKEN", "env-token-0123456789abcdef")
    async with ScriptedHermes(mode="serve") as h, aiohttp.ClientSession() as s:
        assert h.session_token == "env-token-0123456789abcdef"
        async with s.get(h.url + "/") as r:
            assert r.status == 404
    monkeypatch.delenv("HERMES_DASHBOARD_SESSION_TOKEN")
    async with ScriptedHermes() as a, ScriptedHermes() as b:
        assert a.session_token != b.session_token and len(a.session_token) >= 20
        assert re.fullmatch(r"[A-Za-z0-9_-]{20,4096}", a.session_token)


async def test_token_mode_websocket_gates() -> None:
    async with ScriptedHermes() as h, aiohttp.ClientSession() as s:
        base = f"ws://127.0.0.1:{h.port}/api/ws"
        for url, headers in [
            (base, {}),
            (base + "?token=wrong-token-wrong-token", {}),
            (h.ws_url, {"Origin": "http://evil.test"}),
            (h.ws_url, {"Host": "evil.test"}),
        ]:
            with pytest.raises(aiohttp.WSServerHandshakeError) as ei:
                await s.ws_connect(url, headers=headers)
            assert ei.value.status == 403, url
        with pytest.raises(aiohttp.WSServerHandshakeError) as ei:
            await s.ws_connect(h.ws_url, headers={"Origin": "http://evil.test"})
        assert ei.value.status == 403
        c = await GatewayClient.connect(s, h.ws_url, headers={"Origin": f"http://127.0.0.1:{h.port}"})
        ready = await c.event("gateway.ready")
        assert ready["params"]["payload"]["skin"]["name"] == "default"
        await c.close()
        assert h.effects.count("ws.rejected") == 5
        assert h.effects.count("ws.connected") == 1


async def test_account_mode_login_cookie_ticket() -> None:
    async with ScriptedHermes(auth="account", username="alice", password="pw-secret-1") as h, \
            aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as s:
        async with s.get(h.url + "/api/status") as r:
            assert (await r.json())["auth_required"] is True
        async with s.get(h.url + "/") as r:
            assert "__HERMES_SESSION_TOKEN__" not in await r.text()
        async with s.get(h.url + "/api/profiles",
                         headers={"X-Hermes-Session-Token": h.session_token}) as r:
            assert r.status == 401 and (await r.json())["error"] == "unauthenticated"
        async with s.post(h.url + "/api/auth/login", json={"username": "alice", "password": "no"}) as r:
            assert r.status == 401
        async with s.post(h.url + "/auth/password-login",
                          json={"provider": "basic", "username": "alice", "password": "pw-secret-1"}) as r:
            assert r.status == 200 and await r.json() == {"ok": True, "next": "/"}
        async with s.get(h.url + "/api/profiles") as r:
            assert r.status == 200
        with pytest.raises(aiohttp.WSServerHandshakeError):
            await s.ws_connect(h.ws_url + "?token=" + h.session_token)
        async with s.post(h.url + "/api/auth/ws-ticket") as r:
            body = await r.json()
        assert body["ttl_seconds"] == 30
        c = await GatewayClient.connect(s, f"{h.ws_url}?ticket={body['ticket']}")
        await c.event("gateway.ready")
        await c.close()
        with pytest.raises(aiohttp.WSServerHandshakeError) as ei:  # single use
            await s.ws_connect(f"{h.ws_url}?ticket={body['ticket']}")
        assert ei.value.status == 403
        log = h.effects.to_jsonl()
        assert "pw-secret-1" not in log and body["ticket"] not in log


async def test_ticket_expires_with_clock() -> None:
    now = [1000.0]
    async with ScriptedHermes(auth="account", password="pw", clock=lambda: now[0]) as h, \
            aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as s:
        async with s.post(h.url + "/api/auth/login", json={"username": "hermes", "password": "pw"}) as r:
            assert r.status == 200
        async with s.post(h.url + "/api/auth/ws-ticket") as r:
            ticket = (await r.json())["ticket"]
        now[0] += 31
        with pytest.raises(aiohttp.WSServerHandshakeError):
            await s.ws_connect(f"{h.ws_url}?ticket={ticket}")
        assert h.effects.of("ws.rejected")[-1].detail["reason"] == "ticket_expired"
