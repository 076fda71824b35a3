"""Our plugin's rules outside Hermes: bind validation, native names, the listener calls it makes
(against a real loopback server standing in for a runner's listener), caller checks, no token
anywhere it answers. Hermes-only glue (session tool lists) is covered by test_runner_real_hermes."""
from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from aiohttp import web

from fixtures.real_hermes.plugin import bridge as b

TOKEN = "t" * 43


def body(url: str, **over: Any) -> dict[str, Any]:
    out = {"native_tools": True, "session_id": "abcd1234", "stored_session_id": "20261201_x",
           "profile": "default", "generation": "work-1:uuid-1", "bridge_url": url,
           "token": TOKEN, "expires_at": int(time.time() * 1000) + 60_000}
    out.update(over)
    return out


class Listener:
    """A runner-listener stand-in: checks the bearer token, counts what it is sent."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str | None, Any]] = []
        self.url = ""
        self._runner: web.AppRunner | None = None

    async def handle(self, request: web.Request) -> web.Response:
        data = await request.json()
        self.requests.append((request.path, request.headers.get("Authorization"), data))
        if request.headers.get("Authorization") != f"Bearer {TOKEN}":
            return web.json_response({"error": "no", "code": "team_tools_unauthorized"},
                                     status=401)
        if request.path == "/tools/list":
            return web.json_response({"tools": [
                {"id": "team_aa", "name": "create_member", "description": "Create",
                 "inputSchema": {"type": "object"}},
                {"id": "team_bb", "name": "form-team", "inputSchema": "bogus"}],
                "warnings": []})
        return web.json_response({"content": [{"type": "text", "text": "ok"}],
                                  "structuredContent": data})

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post("/{tail:.*}", self.handle)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.url = f"http://127.0.0.1:{self._runner.addresses[0][1]}"

    async def close(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()


@pytest_asyncio.fixture
async def listener() -> AsyncIterator[Listener]:
    lst = Listener()
    await lst.start()
    yield lst
    await lst.close()


def test_native_names_are_stable_per_grant_distinct_across_grants_and_bounded() -> None:
    one = b.native_name("w:1", "create_member")
    assert one == b.native_name("w:1", "create_member")
    assert one != b.native_name("w:2", "create_member")
    assert one.startswith("yaoyao_workspace_") and one.endswith("_create_member")
    assert len(b.native_name("w:1", "x" * 200)) == 64
    assert b.native_name("w:1", "form-team").endswith("_form_team")


@pytest.mark.parametrize("over, reason", [
    ({"bridge_url": "http://10.0.0.1:9/"}, "bridge_url must be a loopback http URL"),
    ({"bridge_url": "https://127.0.0.1:9/"}, "bridge_url must be a loopback http URL"),
    ({"bridge_url": "http://u:p@127.0.0.1:9/"}, "bridge_url must be a loopback http URL"),
    ({"token": ""}, "missing or bad token"),
    ({"native_tools": False}, "native_tools must be true"),
    ({"expires_at": True}, "bad expires_at"),
    ({"stored_session_id": 5}, "bad stored_session_id"),
    ({"workspace_memory": "yes"}, "bad workspace_memory"),
])
def test_bind_validation(over: dict[str, Any], reason: str) -> None:
    assert b.validate_bind(body("http://127.0.0.1:9", **over)) == reason
    assert b.validate_bind(body("http://127.0.0.1:9", stored_session_id=None)) is None
    assert b.validate_bind([]) == "body must be an object"


async def test_bind_lists_tools_and_refusals_never_reach_the_listener(listener: Listener
                                                                      ) -> None:
    state = b.Bridge()
    with pytest.raises(b.BridgeError) as bad:
        await asyncio.to_thread(state.bind, body("http://192.0.2.1:1"))
    assert bad.value.status == 400 and TOKEN not in json.dumps(bad.value.body())
    assert listener.requests == []
    binding = await asyncio.to_thread(state.bind, body(listener.url))
    assert [r[0] for r in listener.requests] == ["/tools/list"]
    assert sorted(t.name for t in binding.tools.values()) == ["create_member", "form-team"]
    assert all(t.parameters.get("type") == "object" for t in binding.tools.values())
    assert TOKEN not in repr(binding) and TOKEN not in json.dumps(state.public_stats())
    assert [t.native for t in state.tools_for("abcd1234")] == sorted(binding.tools)
    assert state.tools_for("other") == []
    assert state.tools_for("abcd1234", now_ms=binding.expires_at + 1) == []  # expired


async def test_calls_only_from_the_bound_session_and_unbind_by_generation(listener: Listener
                                                                          ) -> None:
    state = b.Bridge()
    binding = await asyncio.to_thread(state.bind, body(listener.url))
    native = b.native_name("work-1:uuid-1", "create_member")
    refused = await asyncio.to_thread(state.call, native, {"someone-else"}, {"x": 1}, "call_1")
    assert "not available" in refused and len(listener.requests) == 1
    answer = await asyncio.to_thread(state.call, native, {"20261201_x"}, {"x": 1}, "call_1")
    assert json.loads(answer)["structuredContent"] == {
        "toolId": "team_aa", "arguments": {"x": 1}, "callId": "call_1"}
    assert listener.requests[-1][1] == f"Bearer {TOKEN}"
    odd = await asyncio.to_thread(state.call, native, {"abcd1234"}, {}, "bad id with spaces")
    assert json.loads(odd)["structuredContent"]["callId"].startswith("call_")
    assert state.stats["calls_forwarded"] == 2 and state.stats["calls_refused"] == 1
    assert state.stats["listener_ok"] == 2
    assert state.unbind("abcd1234", "another-generation") is False
    assert state.unbind("abcd1234", binding.generation) is True
    after = await asyncio.to_thread(state.call, native, {"abcd1234"}, {}, "call_2")
    assert "not available" in after and state.stats["calls_forwarded"] == 2


def test_capabilities_report_version_1() -> None:
    caps = b.capabilities("default")
    assert caps["version"] == 1 and caps["native_tools"] is True and caps["in_process"] is True
