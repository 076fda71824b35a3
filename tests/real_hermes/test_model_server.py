"""The scripted OpenAI-compatible model server over a real loopback socket (no Hermes needed)."""
from __future__ import annotations

import json
from typing import Any

import aiohttp
import pytest

from fixtures.real_hermes import Call, ModelServer, Rule, Say, Script
from fixtures.real_hermes.model_server import resolve_tool

SCRIPT = Script(rules=(
    Rule("TEAM", (Call("create_member", {"name": "Ada"}), Say("done", chunks=2))),
    Rule("PING", (Say("PONG-42", chunks=3),)),
), fallback="fallback text", side_reply="A title")
TOOLS = [{"type": "function", "function": {"name": "yaoyao_workspace_ab12cd34_create_member",
                                           "parameters": {"type": "object"}}},
         {"type": "function", "function": {"name": "terminal"}}]


async def _post(m: ModelServer, body: dict[str, Any]) -> tuple[int, Any]:
    async with aiohttp.ClientSession() as http, \
            http.post(m.base_url + "/chat/completions", json=body) as resp:
        if body.get("stream"):
            chunks = []
            async for raw in resp.content:
                line = raw.decode().strip()
                if line.startswith("data: "):
                    chunks.append(line[len("data: "):])
            return resp.status, chunks
        return resp.status, await resp.json()


async def test_plain_reply_and_models_route() -> None:
    async with ModelServer(SCRIPT) as m:
        status, body = await _post(m, {"messages": [{"role": "user", "content": "PING"}],
                                       "tools": TOOLS})
        assert status == 200 and body["object"] == "chat.completion"
        assert body["choices"][0]["message"]["content"] == "PONG-42"
        assert body["choices"][0]["finish_reason"] == "stop"
        async with aiohttp.ClientSession() as http, http.get(m.base_url + "/models") as resp:
            assert [d["id"] for d in (await resp.json())["data"]] == ["fake-model"]
        async with aiohttp.ClientSession() as http, http.get(m.base_url + "/nope") as resp:
            assert resp.status == 404
        assert [c.reply for c in m.calls] == ["text"]


async def test_streamed_tool_call_then_text_by_conversation_position() -> None:
    async with ModelServer(SCRIPT) as m:
        user = {"role": "user", "content": [{"type": "text", "text": "TEAM go"}]}
        status, chunks = await _post(m, {"messages": [user], "tools": TOOLS, "stream": True,
                                         "stream_options": {"include_usage": True}})
        assert status == 200 and chunks[-1] == "[DONE]"
        parsed = [json.loads(c) for c in chunks[:-1]]
        assert all(p["object"] == "chat.completion.chunk" for p in parsed)
        calls = [tc for p in parsed for ch in p["choices"]
                 for tc in ch["delta"].get("tool_calls", [])]
        assert len(calls) == 1
        assert calls[0]["function"]["name"] == "yaoyao_workspace_ab12cd34_create_member"
        assert json.loads(calls[0]["function"]["arguments"]) == {"name": "Ada"}
        assert "usage" in parsed[-1]
        # After the assistant's tool call and its result, the next step is the text.
        follow = [user, {"role": "assistant", "tool_calls": [calls[0]]},
                  {"role": "tool", "tool_call_id": calls[0]["id"], "content": "{}"}]
        _, chunks2 = await _post(m, {"messages": follow, "tools": TOOLS, "stream": True})
        text = "".join(ch["delta"].get("content") or "" for c in chunks2[:-1]
                       for ch in json.loads(c)["choices"])
        assert text == "done"
        assert [(c.reply, c.step) for c in m.calls] == [("tool_call", 0), ("text", 1)]
        assert len(m.tool_calls("create_member")) == 1


async def test_side_requests_and_fallback_are_counted_apart() -> None:
    async with ModelServer(SCRIPT) as m:
        _, side = await _post(m, {"messages": [{"role": "user", "content": "TEAM title?"}]})
        assert side["choices"][0]["message"]["content"] == "A title"
        _, other = await _post(m, {"messages": [{"role": "user", "content": "hello"}],
                                   "tools": TOOLS})
        assert other["choices"][0]["message"]["content"] == "fallback text"
        assert len(m.side_calls) == 1 and len(m.turn_calls) == 1
        status, _ = await _post(m, {"messages": "not a list", "tools": TOOLS})
        assert status == 200


def test_tool_resolution() -> None:
    offered = ["terminal", "yaoyao_workspace_1_create_member", "yaoyao_workspace_2_form_team"]
    assert resolve_tool("terminal", offered) == "terminal"
    assert resolve_tool("create_member", offered) == "yaoyao_workspace_1_create_member"
    assert resolve_tool("create_member", []) == "create_member"  # not offered: as written
    assert resolve_tool("x", ["a_x", "b_x"]) == "x"  # ambiguous: as written


def test_script_from_dict() -> None:
    script = Script.from_dict({"rules": [
        {"prefix": "TEAM", "steps": [{"call": "create_member", "arguments": {"name": "Ada"}},
                                     {"say": "done", "chunks": 1}]}], "fallback": "fb"})
    assert script == Script(rules=(Rule("TEAM", (Call("create_member", {"name": "Ada"}),
                                                 Say("done", chunks=1))),), fallback="fb")
    bad: Any
    for bad in ([], {"rules": [{"prefix": "X", "steps": []}]},
                {"rules": [{"prefix": "X", "steps": [{"shout": "hi"}]}]}):
        with pytest.raises(ValueError, match="script"):
            Script.from_dict(bad)
