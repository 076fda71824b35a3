"""The team-tools bridge plugin against a tiny listener, and the command line."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

from fixtures import ScriptedHermes
from fixtures.hermes.client import GatewayClient

BRIDGE = "/api/plugins/yaoyao-bot-bridge"
REPO = str(Path(__file__).resolve().parents[2])


async def _listener(token: str, seen: list[dict[str, Any]]) -> tuple[web.AppRunner, str]:
    async def handle(request: web.Request) -> web.Response:
        seen.append({"path": request.path, "auth": request.headers.get("Authorization"),
                     "ctype": request.content_type, "body": await request.json()})
        if request.headers.get("Authorization") != f"Bearer {token}":
            return web.json_response({"error": "x", "code": "team_tools_unauthorized"}, status=401)
        if request.path == "/tools/list":
            return web.json_response({"tools": [
                {"id": "team_" + "a" * 32, "name": "create_member", "description": "d",
                 "inputSchema": {}},
                {"id": "team_" + "b" * 32, "name": "form_team", "description": "d",
                 "inputSchema": {}}], "warnings": []})
        body = await request.json()
        return web.json_response({"content": [{"type": "text", "text": "ok " + body["toolId"]}]})

    app = web.Application()
    app.router.add_post("/tools/list", handle)
    app.router.add_post("/tools/call", handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]  # the bound (host, port): public AppRunner API
    return runner, f"http://127.0.0.1:{port}"


async def test_bridge_bind_and_team_tool_calls() -> None:
    seen: list[dict[str, Any]] = []
    lease_token = "lease-token-" + "z" * 20
    runner, url = await _listener(lease_token, seen)
    try:
        async with ScriptedHermes("team", time_scale=0) as h, aiohttp.ClientSession() as s:
            hdr = h.auth_headers
            async with s.get(h.url + BRIDGE + "/capabilities?profile=default", headers=hdr) as r:
                caps = await r.json()
            assert caps["version"] == 1 and caps["ready"] and caps["in_process"] and caps["native_tools"]
            h.bridge.ready = False
            async with s.get(h.url + BRIDGE + "/capabilities", headers=hdr) as r:
                assert (await r.json())["ready"] is False
            async with s.get(h.url + BRIDGE + "/capabilities") as r:
                assert r.status == 401
            c = await GatewayClient.connect(s, h.ws_url)
            created = (await c.request("session.create", {}))["result"]
            sid, stored = created["session_id"], created["stored_session_id"]
            # unbound: the model's team-tool call cannot reach a runner
            await c.request("prompt.submit", {"session_id": sid, "text": "TEAMTEST 0"})
            await c.event("message.complete", session_id=sid)
            assert h.effects.count("team_tool.unavailable") == 2 and not seen
            bind = {"native_tools": True, "session_id": sid, "stored_session_id": stored,
                    "profile": "default", "generation": "work1:g1", "bridge_url": url,
                    "token": lease_token, "expires_at": 1795999999, "workspace_memory": True}
            async with s.post(h.url + BRIDGE + "/bind", json={**bind, "bridge_url": "http://10.0.0.1:1"},
                              headers=hdr) as r:
                assert r.status == 400
            async with s.post(h.url + BRIDGE + "/bind", json=bind, headers=hdr) as r:
                assert await r.json() == {"ok": True, "native_tools": True}
            start = len(c.received)
            await c.request("prompt.submit", {"session_id": sid, "text": "TEAMTEST 1"})
            done = await c.event("message.complete", session_id=sid, start=start)
            assert done["params"]["payload"]["text"] == "Team is ready."
            calls = h.effects.of("team_tool.called", session_id=sid)
            assert [e.detail["tool"] for e in calls] == ["create_member", "form_team"]
            assert calls[0].detail["tool_id"] == "team_" + "a" * 32
            assert [x["path"] for x in seen] == ["/tools/list", "/tools/call"] * 2
            assert all(x["auth"] == f"Bearer {lease_token}" and x["ctype"] == "application/json"
                       for x in seen)
            assert seen[0]["body"] == {}
            assert seen[1]["body"]["arguments"] == {"name": "Ada", "role": "reviewer"}
            completes = [f for f in c.received[start:] if f.get("method") == "event"
                         and f["params"]["type"] == "tool.complete"]
            assert completes[0]["params"]["payload"]["name"] == "yaoyao_workspace_create_member"
            assert completes[0]["params"]["payload"]["result"]["content"][0]["text"].startswith("ok ")
            # duplicate callId
            seen.clear()
            await c.request("prompt.submit", {"session_id": sid, "text": "TEAMDUP"})
            await h.effects.wait_for("turn.finished", rule="team-dup")
            dup = [x["body"]["callId"] for x in seen if x["path"] == "/tools/call"]
            assert dup == ["call_dup_1", "call_dup_1"]
            async with s.post(h.url + BRIDGE + "/unbind", json={"session_id": sid, "generation": "old"},
                              headers=hdr) as r:
                assert await r.json() == {"ok": True}
            assert sid in h.bridge.bindings
            async with s.post(h.url + BRIDGE + "/unbind", json={"session_id": sid,
                                                              "generation": "work1:g1"}, headers=hdr) as r:
                assert await r.json() == {"ok": True}
            assert sid not in h.bridge.bindings
            assert [e.detail["removed"] for e in h.effects.of("unbind")] == [False, True]
            assert lease_token not in h.effects.to_jsonl()
            await c.close()
    finally:
        await runner.cleanup()


async def test_command_line_starts_like_hermes_serve(tmp_path: Path) -> None:
    ready = tmp_path / "ready.json"
    env = {**os.environ, "HERMES_DASHBOARD_SESSION_TOKEN": "cli-token-0123456789abcdef",
           "PYTHONPATH": REPO}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "fixtures.scripted_hermes", "--mode", "serve", "--host", "127.0.0.1", "--port", "0",
        "--ready-file", str(ready), "--script", "tool", "--effects-file", str(tmp_path / "e.jsonl"),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env,
        start_new_session=True)
    try:
        assert proc.stdout is not None
        line = (await asyncio.wait_for(proc.stdout.readline(), 15)).decode()
        assert line.startswith("HERMES_BACKEND_READY port=")
        port = int(line.strip().split("=")[1])
        assert json.loads(ready.read_text()) == {"port": port}
        async with aiohttp.ClientSession() as s:
            async with s.get(f"http://127.0.0.1:{port}/api/profiles",
                             headers={"X-Hermes-Session-Token": "cli-token-0123456789abcdef"}) as r:
                assert r.status == 200
            c = await GatewayClient.connect(
                s, f"ws://127.0.0.1:{port}/api/ws?token=cli-token-0123456789abcdef")
            await c.request("session.create", {})
            await c.close()
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = await asyncio.wait_for(proc.communicate(), 10)
    assert proc.returncode == 0
    assert b"cli-token" not in out + err
    kinds = [json.loads(x)["kind"] for x in (tmp_path / "e.jsonl").read_text().splitlines()]
    assert "session.created" in kinds
