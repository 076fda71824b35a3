"""JSON-RPC errors, limits, sessions, pause points and the effect log."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
import pytest_asyncio

from fixtures import ScriptedHermes
from fixtures.hermes.client import GatewayClient
from fixtures.hermes.pauses import PauseSpec, PauseSpecError

pytest_plugins = ["fixtures.hermes.pytest_plugin"]


@pytest_asyncio.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as s:
        yield s


async def _session(c: GatewayClient, **params: object) -> str:
    r = await c.request("session.create", {"cols": 100, **params})
    return str(r["result"]["session_id"])


async def test_malformed_frames(scripted_hermes: ScriptedHermes, http: aiohttp.ClientSession) -> None:
    c = await GatewayClient.connect(http, scripted_hermes.ws_url)
    await c.event("gateway.ready")
    cases = [
        ("{not json", None, -32700, "parse error"),
        ("[1,2]", None, -32600, "invalid request: expected an object"),
        ('{"jsonrpc":"2.0","id":5}', 5, -32600, "invalid request: method must be a non-empty string"),
        ('{"jsonrpc":"2.0","id":6,"method":"session.create","params":[1]}', 6, -32602,
         "invalid params: expected an object"),
        ('{"jsonrpc":"2.0","id":7,"method":"no.such"}', 7, -32601, "unknown method: no.such"),
        ('{"jsonrpc":"2.0","id":8,"method":"prompt.submit","params":{"text":"x"}}', 8, 4001,
         "session not found"),
        ('{"jsonrpc":"2.0","id":9,"method":"session.resume","params":{}}', 9, 4006,
         "session_id required"),
        ('{"jsonrpc":"2.0","id":10,"method":"session.resume","params":{"session_id":"nope"}}', 10,
         4007, "session not found"),
        ('{"jsonrpc":"2.0","id":11,"method":"clarify.respond","params":{"request_id":"x"}}', 11,
         4009, "no pending answer request"),
    ]
    for text, rid, code, message in cases:
        start = len(c.received)
        await c.send(text)
        f = await c.wait(lambda f: "error" in f, start=start)
        assert f["id"] == rid and f["error"] == {"code": code, "message": message}, text
    await c.ws.send_bytes(b"\x00\x01")
    f = await c.wait(lambda f: f.get("error", {}).get("code") == -32700 and f is not c.received[1])
    sid = await _session(c)
    assert (await c.request("session.close", {"session_id": "zzz"}))["result"] == {"closed": False}
    assert (await c.request("session.close", {"session_id": sid}))["result"] == {"closed": True}
    await c.close()


async def test_frame_size_limit(scripted_hermes_factory, http: aiohttp.ClientSession) -> None:  # type: ignore[no-untyped-def]
    h = await scripted_hermes_factory(max_frame_bytes=1024)
    c = await GatewayClient.connect(http, h.ws_url)
    await c.event("gateway.ready")
    await c.send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "session.list",
                             "params": {"pad": "x" * 2048}}))
    await asyncio.wait_for(c._reader, 5)
    assert c.ws.close_code == 1009
    eff = await h.effects.wait_for("ws.closed")
    assert eff.detail["code"] == 1009


async def test_sessions_outlive_socket_unless_close_on_disconnect(
        scripted_hermes: ScriptedHermes, http: aiohttp.ClientSession) -> None:
    h = scripted_hermes
    c = await GatewayClient.connect(http, h.ws_url)
    keep = await _session(c, profile="default")
    drop = await _session(c, close_on_disconnect=True)
    await c.request("prompt.submit", {"session_id": keep, "text": "first"})
    await c.event("message.complete", session_id=keep)
    never = (await c.request("session.create", {}))["result"]["stored_session_id"]
    await c.close()
    closed = await h.effects.wait_for("session.closed", session_id=drop)
    assert closed.detail["reason"] == "ws_disconnect"
    assert keep in h.live_sessions and drop not in h.live_sessions
    # another socket can still drive the detached session; resume returns the same live id
    c2 = await GatewayClient.connect(http, h.ws_url)
    stored = h.live_sessions[keep].stored.id
    r = await c2.request("session.resume", {"session_id": stored, "cols": 80})
    assert r["result"]["session_id"] == keep and r["result"]["resumed"] == stored
    assert r["result"]["message_count"] == 2
    # a session that never had a prompt has no DB row yet (as real): 4007
    r = await c2.request("session.resume", {"session_id": never})
    assert r["error"] == {"code": 4007, "message": "session not found"}
    assert h.effects.of("session.resumed")[-1].detail["reused"] is True
    # only the prompted stored session has a DB row, in session.list and GET /api/sessions alike
    listed = (await c2.request("session.list", {}))["result"]["sessions"]
    assert [x["id"] for x in listed] == [stored]
    async with http.get(h.url + "/api/sessions", params={"limit": "x", "offset": "0"},
                        headers=h.auth_headers) as resp:
        body = await resp.json()
    assert [x["id"] for x in body["sessions"]] == [stored]
    assert (body["total"], body["limit"], body["offset"]) == (1, 20, 0)
    await c2.request("prompt.submit", {"session_id": keep, "text": "hi"})
    done = await c2.event("message.complete", session_id=keep)
    assert done["params"]["payload"]["text"] == "Hello from the fake model. PONG-42"
    assert h.effects.count("prompt.accepted", session_id=keep) == 2
    assert [e.socket_id for e in h.effects.of("prompt.accepted")] == ["ws1", "ws2"]
    await c2.close()


async def test_unknown_profile_falls_back(scripted_hermes_factory, http) -> None:  # type: ignore[no-untyped-def]
    h = await scripted_hermes_factory(profiles=("default", "work"))
    c = await GatewayClient.connect(http, h.ws_url)
    r = await c.request("session.create", {"profile": "work"})
    assert r["result"]["info"]["profile_name"] == "work"
    r = await c.request("session.create", {"profile": "ghost"})
    assert r["result"]["info"]["profile_name"] == "default"
    assert h.effects.of("session.created")[-1].detail["requested_profile"] == "ghost"
    await c.close()


async def test_pause_before_tool_complete_then_interrupt(
        scripted_hermes_factory, http) -> None:  # type: ignore[no-untyped-def]
    h = await scripted_hermes_factory("tool", time_scale=0)
    c = await GatewayClient.connect(http, h.ws_url)
    sid = await _session(c)
    p = h.pause_at("before tool.complete of step run-echo", session_id=sid)
    await c.request("prompt.submit", {"session_id": sid, "text": "TOOLTEST x"})
    hit = await p.reached(timeout=5)
    assert hit.step == 2 and hit.session_id == sid
    assert h.effects.count("tool.executed", session_id=sid) == 1
    assert "tool.complete" not in c.events(sid)
    r = await c.request("session.interrupt", {"session_id": sid})
    assert r["result"] == {"status": "interrupted"}
    p.release()
    done = await c.event("message.complete", session_id=sid)
    assert done["params"]["payload"]["status"] == "interrupted"
    assert c.events(sid).count("tool.complete") == 1  # the tool had run; its completion is sent
    assert h.effects.of("turn.finished")[0].detail["status"] == "interrupted"
    await c.close()


async def test_pause_before_prompt_accept_holds_everything(
        scripted_hermes: ScriptedHermes, http: aiohttp.ClientSession) -> None:
    h = scripted_hermes
    c = await GatewayClient.connect(http, h.ws_url)
    sid = await _session(c)
    p = h.pause_at("before prompt.accept")
    await c.send({"jsonrpc": "2.0", "id": 77, "method": "prompt.submit",
                  "params": {"session_id": sid, "text": "hi"}})
    await p.reached()
    # other requests on the same socket are still served while held
    assert (await c.request("session.usage", {"session_id": sid}))["result"]["calls"] == 0
    assert h.effects.count("prompt.accepted") == 0 and "message.start" not in c.events(sid)
    p.release()
    await c.event("message.complete", session_id=sid)
    assert h.effects.count("prompt.accepted", session_id=sid) == 1
    await c.close()


async def test_pause_grammar() -> None:
    assert PauseSpec.parse("before tool.complete of step 3") == PauseSpec("before", "tool.complete", None, 3)
    assert PauseSpec.parse("after message.delta #2 of step stream").nth == 2
    assert PauseSpec.parse("before step 1") == PauseSpec("before", "step", None, 1)
    assert PauseSpec.parse("After session.create").when == "after"
    for bad in ["", "during x", "before", "before x #0"]:
        with pytest.raises(PauseSpecError):
            PauseSpec.parse(bad)


async def test_approval_deny_and_busy_prompt(scripted_hermes_factory, http) -> None:  # type: ignore[no-untyped-def]
    h = await scripted_hermes_factory("danger", time_scale=0)
    c = await GatewayClient.connect(http, h.ws_url)
    sid = await _session(c)
    await c.request("prompt.submit", {"session_id": sid, "text": "DANGERTEST now"})
    await c.event("approval.request", session_id=sid)
    r = await c.request("prompt.submit", {"session_id": sid, "text": "DANGERTEST again"})
    assert r["result"] == {"status": "queued"}  # busy: running turn interrupted, prompt queued
    first = await c.event("message.complete", session_id=sid)
    assert first["params"]["payload"]["status"] == "interrupted"
    assert h.effects.count("tool.denied") == 1 and h.effects.count("tool.executed") == 0
    start = c.received.index(first) + 1
    await c.event("approval.request", session_id=sid, start=start)
    r = await c.request("approval.respond", {"session_id": sid, "choice": "deny"})
    assert r["result"] == {"resolved": 1}
    second = await c.event("message.complete", session_id=sid, start=start)
    assert second["params"]["payload"]["status"] == "complete"
    assert h.effects.count("tool.denied") == 2 and h.effects.count("tool.executed") == 0
    assert (await c.request("approval.respond", {"session_id": sid, "choice": "once"}))[
        "result"] == {"resolved": 0}
    await c.close()


async def test_clarify_and_hang(scripted_hermes_factory, http) -> None:  # type: ignore[no-untyped-def]
    h = await scripted_hermes_factory({"rules": [
        {"match": {"prefix": "CLARIFY"}, "steps": [{"clarify": "Which?", "choices": ["a", "b"]},
                                                   {"say": "ok"}]},
        {"match": {"prefix": "HANG"}, "steps": [{"say": "part"}, {"wait": "interrupt"}]}]})
    c = await GatewayClient.connect(http, h.ws_url)
    sid = await _session(c)
    await c.request("prompt.submit", {"session_id": sid, "text": "CLARIFY me"})
    req = await c.event("clarify.request", session_id=sid)
    rid = req["params"]["payload"]["request_id"]
    assert (await c.request("clarify.respond", {"request_id": rid, "answer": "b"}))["result"] == {"status": "ok"}
    await c.event("message.complete", session_id=sid)
    assert h.effects.of("clarify.responded")[0].detail["answer"] == "b"
    start = len(c.received)
    await c.request("prompt.submit", {"session_id": sid, "text": "HANG on"})
    await c.event("message.delta", session_id=sid, start=start)
    active = (await c.request("session.active_list", {"current_session_id": sid}))["result"]
    assert active["sessions"][0]["status"] == "working" and active["sessions"][0]["current"]
    await c.request("session.interrupt", {"session_id": sid})
    done = await c.event("message.complete", session_id=sid, start=start)
    assert done["params"]["payload"] | {"usage": None} == {"text": "part", "usage": None,
                                                            "status": "interrupted"}
    hist = (await c.request("session.history", {"session_id": sid}))["result"]
    assert hist["count"] == 4
    await c.close()


async def test_http_effects(tmp_path: Path, scripted_hermes_factory, http) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "a.txt").write_text("hello")
    h = await scripted_hermes_factory(files_root=tmp_path)
    hdr = h.auth_headers
    async with http.get(h.url + "/api/files/download", params={"path": str(tmp_path / "a.txt")},
                        headers=hdr) as r:
        assert r.status == 200 and await r.text() == "hello"
    async with http.get(h.url + "/api/files/download", params={"path": "a.txt"}, headers=hdr) as r:
        assert r.status == 200
    async with http.get(h.url + "/api/files/download",
                        params={"path": "/nonexistent/x", "token": h.session_token}) as r:
        assert r.status == 404
    assert [e.detail["status"] for e in h.effects.of("file.read")] == [200, 200, 404]
    async with http.post(h.url + "/api/config", json={"model": "x"}, headers=hdr) as r:
        assert r.status == 200
    async with http.delete(h.url + "/api/sessions/abc", headers=hdr) as r:
        assert r.status == 200
    async with http.put(h.url + "/api/profiles/default", data=b"{bad", headers=hdr) as r:
        assert r.status == 200
    muts = h.effects.of("http.mutation")
    assert [(m.detail["method"], m.detail["path"]) for m in muts] == [
        ("POST", "/api/config"), ("DELETE", "/api/sessions/abc"), ("PUT", "/api/profiles/default")]
    async with http.get(h.url + "/api/nothing", headers=hdr) as r:
        assert r.status == 404
    async with http.post(h.url + "/api/config", data=b"x" * (17 * 1024 * 1024), headers=hdr) as r:
        assert r.status == 413
    async with http.get(h.url + "/api/sessions/nope/messages", headers=hdr) as r:
        assert r.status == 404


async def test_effect_log_wait_and_file(tmp_path: Path, scripted_hermes_factory, http) -> None:  # type: ignore[no-untyped-def]
    sink = tmp_path / "effects.jsonl"
    h = await scripted_hermes_factory(effects_file=sink, seed=3)
    waiter = asyncio.ensure_future(h.effects.wait_for("session.created", timeout=5))
    c = await GatewayClient.connect(http, h.ws_url)
    sid = await _session(c)
    eff = await waiter
    assert eff.session_id == sid and eff.profile == "default" and eff.socket_id == "ws1"
    with pytest.raises(TimeoutError):
        await h.effects.wait_for("session.closed", timeout=0.05)
    lines = [json.loads(x) for x in sink.read_text().splitlines()]
    assert [x["kind"] for x in lines] == h.effects.kinds()
    assert [e.seq for e in h.effects.entries] == list(range(1, len(h.effects) + 1))
    await c.close()


async def test_ids_are_seeded(http: aiohttp.ClientSession) -> None:
    got = []
    for _ in range(2):
        async with ScriptedHermes(seed=42, clock=lambda: 1795992824.0) as h:
            c = await GatewayClient.connect(http, h.ws_url)
            r = await c.request("session.create", {})
            got.append((r["result"]["session_id"], r["result"]["stored_session_id"]))
            await c.close()
    assert got[0] == got[1]
    assert got[0][1].startswith("20261") and len(got[0][0]) == 8


async def test_error_step_and_status(scripted_hermes_factory, http) -> None:  # type: ignore[no-untyped-def]
    h = await scripted_hermes_factory({"rules": [
        {"name": "boom", "match": {"regex": "^BOOM"}, "steps": [{"say": "x"}, {"error": "model down"},
                                                              {"say": "never"}]}]})
    c = await GatewayClient.connect(http, h.ws_url)
    sid = await _session(c)
    r = await c.request("session.create", {"cols": "abc"})
    assert r["error"] == {"code": -32603, "message": "internal error"}
    await c.request("prompt.submit", {"session_id": sid, "text": "BOOM"})
    err = await c.event("error", session_id=sid)
    assert err["params"]["payload"] == {"message": "model down"}
    done = await c.event("message.complete", session_id=sid)
    assert done["params"]["payload"] == {"text": "Error: model down", "status": "error"}
    status = (await c.request("session.status", {"session_id": sid}))["result"]
    assert status["output"].startswith("Hermes TUI Status") and "Agent Running: No" in status["output"]
    await c.close()


def test_script_validation() -> None:
    from fixtures import Script, ScriptError
    bad = [
        [],
        {"rules": [{"match": {"glob": "x"}, "steps": []}]},
        {"rules": [{"match": "*", "steps": [{"say": "a", "tool": "b"}]}]},
        {"rules": [{"match": "*", "steps": [{"tool": "t", "args": []}]}]},
        {"rules": [{"match": {"regex": "("}, "steps": []}]},
        {"rules": [{"match": "*", "steps": [{"wait": "forever"}]}]},
        {"rules": [{"match": "*", "steps": [{"say": "a", "extra": 1}]}]},
        {"version": 2},
        "no-such-bundled-script",
    ]
    for b in bad:
        with pytest.raises(ScriptError):
            Script.load(b)  # type: ignore[arg-type]
    s = Script.load({"rules": [{"name": "r", "match": {"contains": "abc"},
                                "steps": [{"name": "one", "say": "x"}]}]})
    assert s.rule_for("xxabcxx").name == "r" and s.rule_for("nope").name == "default"
    assert s.rules[0].step("one") is s.rules[0].step(1)
