"""The loopback listener over real sockets on 127.0.0.1 (aiohttp client, raw sockets)."""
from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from runner_ref.errors import ServerError
from runner_ref.teamtools import ids
from runner_ref.teamtools.listener import ListenerTimings, LoopbackListener, ToolSpec

pytestmark = pytest.mark.timeout(60)

TOOLS = [ToolSpec("yaoyao_workspace_create_member", "create_member", "Create a member",
                  {"type": "object", "properties": {"name": {"type": "string"}}}),
         ToolSpec("yaoyao_workspace_form_team", "form_team", "Form a team", {"type": "object"})]


class Relay:
    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any], str]] = []
        self.result: Any = {"ok": True}
        self.error: Exception | None = None
        self.gate: asyncio.Event | None = None
        self.called = asyncio.Event()   # set by the first relayed call

    async def __call__(self, tool_id: str, arguments: dict[str, Any], call_id: str) -> Any:
        self.calls.append((tool_id, arguments, call_id))
        self.called.set()
        if self.gate is not None:
            await self.gate.wait()
        if self.error is not None:
            raise self.error
        return self.result


class Env:
    def __init__(self, listener: LoopbackListener, relay: Relay, session: aiohttp.ClientSession,
                 active: list[bool]) -> None:
        self.listener, self.relay, self.session, self.active = listener, relay, session, active

    def headers(self, **extra: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.listener.token}", **extra}

    async def post(self, path: str, body: Any, **kw: Any) -> tuple[int, Any]:
        headers = kw.pop("headers", None) or self.headers()
        async with self.session.post(self.listener.url + path, json=body, headers=headers,
                                     **kw) as resp:
            return resp.status, await resp.json(content_type=None)

    def tool_id(self, real: str) -> str:
        return ids.opaque_id(self.listener.token, real)


@pytest.fixture
async def env() -> AsyncIterator[Env]:
    relay, active = Relay(), [True]
    listener = LoopbackListener(tools=TOOLS, relay=relay, is_active=lambda: active[0],
                                call_limit=4)
    await listener.start()
    async with aiohttp.ClientSession() as session:
        yield Env(listener, relay, session, active)
    await listener.close()


async def raw(port: int, request: bytes, source: str = "127.0.0.1") -> tuple[int, dict[str, Any]]:
    """Send bytes on a fresh socket (optionally from another loopback source address)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port, local_addr=(source, 0))
    try:
        writer.write(request)
        await writer.drain()
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
        status = int(head.split(b" ", 2)[1])
        length = 0
        for line in head.split(b"\r\n"):
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":", 1)[1])
        body = await asyncio.wait_for(reader.readexactly(length), 10) if length else b""
        return status, (json.loads(body) if body.startswith(b"{") else {"raw": body.decode()})
    finally:
        writer.close()


def request_bytes(env: Env, *, host: str | None = None, extra: str = "", body: bytes = b"{}",
                  path: str = "/tools/list", method: str = "POST") -> bytes:
    host = f"127.0.0.1:{env.listener.port}" if host is None else host
    host_line = f"Host: {host}\r\n" if host else ""
    return (f"{method} {path} HTTP/1.1\r\n{host_line}Authorization: Bearer {env.listener.token}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n{extra}"
            f"Connection: close\r\n\r\n").encode() + body


async def test_list_gives_opaque_stable_ids(env: Env) -> None:
    status, body = await env.post("/tools/list", {})
    assert status == 200 and body["warnings"] == []
    assert [t["id"] for t in body["tools"]] == [env.tool_id(t.id) for t in TOOLS]
    assert [t["name"] for t in body["tools"]] == ["create_member", "form_team"]
    assert body["tools"][0]["inputSchema"] == TOOLS[0].input_schema
    assert "yaoyao_workspace" not in json.dumps(body)
    assert (await env.post("/tools/list", {}))[1] == body


async def test_call_relays_the_real_id_and_dedupes(env: Env) -> None:
    env.relay.result = {"member": {"id": "m1"}}
    call = {"toolId": env.tool_id("yaoyao_workspace_create_member"),
            "arguments": {"name": "Ann"}, "callId": "call-1"}
    first = await env.post("/tools/call", call)
    assert first == (200, {"content": [{"type": "text", "text": '{"member": {"id": "m1"}}'}],
                           "structuredContent": {"member": {"id": "m1"}}})
    assert await env.post("/tools/call", call) == first
    assert env.relay.calls == [("yaoyao_workspace_create_member", {"name": "Ann"}, "call-1")]
    status, body = await env.post("/tools/call", {**call, "arguments": {"name": "Bob"}})
    assert (status, body["code"]) == (409, "idempotency_conflict")


async def test_concurrent_repeats_share_one_relay(env: Env) -> None:
    env.relay.gate = asyncio.Event()
    call = {"toolId": env.tool_id("yaoyao_workspace_form_team"), "arguments": {},
            "callId": "same"}
    waiting = [asyncio.ensure_future(env.post("/tools/call", call)) for _ in range(5)]
    await asyncio.wait_for(env.relay.called.wait(), 10)
    await asyncio.wait_for(env.listener.calls.until_waiting("same", 5), 10)  # all 5 joined it
    env.relay.gate.set()
    answers = await asyncio.gather(*waiting)
    assert len(env.relay.calls) == 1 and all(a == answers[0] for a in answers)


async def test_relay_failure_is_http_200_is_error(env: Env) -> None:
    env.relay.error = ServerError(409, "idempotency_conflict", "server saw another payload")
    call = {"toolId": env.tool_id("yaoyao_workspace_form_team"), "arguments": {}, "callId": "x"}
    status, body = await env.post("/tools/call", call)
    assert status == 200 and body["isError"] is True
    assert json.loads(body["content"][0]["text"])["code"] == "idempotency_conflict"


async def test_call_limit_unknown_tool_and_other_paths(env: Env) -> None:
    tool = env.tool_id("yaoyao_workspace_form_team")
    for i in range(4):
        assert (await env.post("/tools/call", {"toolId": tool, "arguments": {},
                                               "callId": f"c{i}"}))[0] == 200
    status, body = await env.post("/tools/call", {"toolId": tool, "arguments": {}, "callId": "c9"})
    assert (status, body["code"]) == (429, "team_tool_call_limit")
    status, body = await env.post("/tools/call", {"toolId": "yaoyao_workspace_form_team",
                                                  "arguments": {}, "callId": "z"})
    assert (status, body["code"]) == (404, "team_tool_not_found")
    status, body = await env.post("/tools/other", {})
    assert (status, body["code"]) == (404, "not_found")
    status, body = await env.post("/tools/call", {"toolId": tool, "arguments": [], "callId": "q"})
    assert (status, body["code"]) == (400, "invalid_tool_call")


async def test_head_gates_over_http(env: Env) -> None:
    url = env.listener.url + "/tools/list"
    cases: list[tuple[dict[str, Any], int, str]] = [
        ({"headers": {"Authorization": "Bearer wrong"}, "json": {}}, 401,
         "team_tools_unauthorized"),
        ({"headers": env.headers(Origin="http://127.0.0.1"), "json": {}}, 403,
         "team_tools_forbidden"),
        ({"headers": env.headers(), "data": b"{}"}, 415, "invalid_content_type"),
        ({"headers": env.headers(**{"Content-Type": "application/json"}), "data": b"{x"}, 400,
         "invalid_json"),
        ({"headers": env.headers(**{"Content-Type": "application/json"}),
          "data": b"[" * 40 + b"]" * 40}, 400, "invalid_json"),
    ]
    for kwargs, status, code in cases:
        async with env.session.post(url, **kwargs) as resp:
            assert (resp.status, (await resp.json())["code"]) == (status, code), kwargs
    async with env.session.get(url, headers=env.headers()) as resp:
        assert (resp.status, (await resp.json())["code"]) == (405, "method_not_allowed")
    env.active[0] = False
    assert (await env.post("/tools/list", {}))[1]["code"] == "team_tools_expired"
    async with env.session.post(url, json={}) as resp:  # token checked before expiry
        assert (await resp.json())["code"] == "team_tools_unauthorized"


async def test_body_limit_over_http(env: Env) -> None:
    big = b'{"a":"' + b"x" * (256 * 1024) + b'"}'
    async with env.session.post(env.listener.url + "/tools/list", data=big,
                                headers=env.headers(**{"Content-Type": "application/json"})) as r:
        assert (r.status, (await r.json())["code"]) == (413, "team_tool_input_limit")
    # A declared length over the limit is refused before any body byte is read.
    head = request_bytes(env, body=b"")
    head = head.replace(b"Content-Length: 0", b"Content-Length: 300000")
    assert await raw(env.listener.port, head) == (
        413, {"error": "team tool input too large", "code": "team_tool_input_limit"})


@pytest.mark.parametrize("host", ["localhost:{port}", "127.0.0.1", "127.0.0.1:1",
                                  "[::1]:{port}", "evil.example"])
async def test_host_must_be_exact(env: Env, host: str) -> None:
    req = request_bytes(env, host=host.format(port=env.listener.port))
    status, body = await raw(env.listener.port, req)
    assert (status, body["code"]) == (403, "team_tools_forbidden")


async def test_raw_socket_cases(env: Env) -> None:
    port = env.listener.port
    assert (await raw(port, request_bytes(env)))[0] == 200
    status, body = await raw(port, request_bytes(env, extra="Origin: null\r\n"))
    assert (status, body["code"]) == (403, "team_tools_forbidden")
    two_hosts = request_bytes(env, extra=f"Host: 127.0.0.1:{port}\r\n")
    status, _ = await raw(port, two_hosts)
    assert status == 400  # aiohttp's parser refuses a duplicate Host before the gates
    status, body = await raw(port, request_bytes(env), source="127.0.0.2")
    assert (status, body["code"]) == (403, "team_tools_forbidden")


async def test_more_than_30_headers_is_refused(env: Env) -> None:
    extra = "".join(f"X-Pad-{i}: {i}\r\n" for i in range(30))
    status, body = await raw(env.listener.port, request_bytes(env, extra=extra))
    assert status == 400 and "Too many headers" in body["raw"]
    few = "".join(f"X-Pad-{i}: {i}\r\n" for i in range(20))
    assert (await raw(env.listener.port, request_bytes(env, extra=few)))[0] == 200


async def test_no_response_ever_carries_the_token(env: Env) -> None:
    bodies = [await env.post("/tools/list", {}),
              await env.post("/nope", {}),
              await env.post("/tools/list", {}, headers={"Authorization": "Bearer x"})]
    assert env.listener.token not in json.dumps(bodies)


async def test_close_stops_the_listener() -> None:
    listener = LoopbackListener(tools=TOOLS, relay=Relay(), is_active=lambda: True,
                                timings=ListenerTimings(shutdown=0.2))
    await listener.start()
    port = listener.port
    assert port > 0 and len(listener.token) == 43
    await listener.close()
    with pytest.raises(OSError):
        await asyncio.open_connection("127.0.0.1", port)
    await listener.close()  # idempotent


async def test_close_answers_a_running_call_with_is_error() -> None:
    relay = Relay()
    relay.gate = asyncio.Event()
    listener = LoopbackListener(tools=TOOLS, relay=relay, is_active=lambda: True)
    await listener.start()
    async with aiohttp.ClientSession() as session:
        env = Env(listener, relay, session, [True])
        call = {"toolId": env.tool_id("yaoyao_workspace_form_team"), "arguments": {},
                "callId": "slow"}
        pending = asyncio.ensure_future(env.post("/tools/call", call))
        await asyncio.wait_for(relay.called.wait(), 10)
        await listener.close()
        status, body = await pending
        assert status == 200 and body["isError"] is True


async def test_idle_keep_alive_connections_are_closed() -> None:
    listener = LoopbackListener(tools=TOOLS, relay=Relay(), is_active=lambda: True,
                                timings=ListenerTimings(keepalive=0.2))
    await listener.start()
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", listener.port)
        body = b"{}"
        writer.write(f"POST /tools/list HTTP/1.1\r\nHost: 127.0.0.1:{listener.port}\r\n"
                     f"Authorization: Bearer {listener.token}\r\nContent-Type: application/json\r\n"
                     f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
        await writer.drain()
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
        assert head.startswith(b"HTTP/1.1 200")
        # The server closes the idle connection by itself: read until EOF, bounded.
        rest = await asyncio.wait_for(reader.read(), 5)
        assert b"tools" in rest
        writer.close()
    finally:
        await listener.close()


async def test_a_body_that_never_arrives_times_out() -> None:
    # the close waits out the unfinished request for at most `shutdown` (1 s by default)
    listener = LoopbackListener(tools=TOOLS, relay=Relay(), is_active=lambda: True,
                                timings=ListenerTimings(request=0.2, shutdown=0.1))
    await listener.start()
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", listener.port)
        writer.write(f"POST /tools/list HTTP/1.1\r\nHost: 127.0.0.1:{listener.port}\r\n"
                     f"Authorization: Bearer {listener.token}\r\nContent-Type: application/json\r\n"
                     f"Content-Length: 10\r\n\r\n{{".encode())
        await writer.drain()
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
        assert head.startswith(b"HTTP/1.1 408")
        writer.close()
    finally:
        await listener.close()


async def test_expect_100_continue_only_after_the_head_gates(env: Env) -> None:
    port, body = env.listener.port, b"{}"

    async def send_head(token: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(f"POST /tools/list HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
                     f"Authorization: Bearer {token}\r\nContent-Type: application/json\r\n"
                     f"Content-Length: {len(body)}\r\nExpect: 100-continue\r\n\r\n".encode())
        await writer.drain()
        return reader, writer

    reader, writer = await send_head(env.listener.token)
    assert await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5) == b"HTTP/1.1 100 Continue\r\n\r\n"
    writer.write(body)
    await writer.drain()
    assert (await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)).startswith(b"HTTP/1.1 200")
    writer.close()
    reader, writer = await send_head("wrong")
    assert (await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)).startswith(b"HTTP/1.1 401")
    writer.close()


async def test_a_head_that_never_completes_gets_the_connection_closed() -> None:
    listener = LoopbackListener(tools=TOOLS, relay=Relay(), is_active=lambda: True,
                                timings=ListenerTimings(keepalive=0.2))
    await listener.start()
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", listener.port)
        writer.write(f"POST /tools/list HTTP/1.1\r\nHost: 127.0.0.1:{listener.port}\r\n".encode())
        await writer.drain()
        assert await asyncio.wait_for(reader.read(), 5) == b""  # closed, no answer
        writer.close()
    finally:
        await listener.close()
