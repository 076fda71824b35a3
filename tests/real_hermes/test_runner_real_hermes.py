"""The reference runner (a black-box subprocess) between fake_server's ControlPlane and a REAL
Hermes Agent 0.19.0 (``hermes dashboard``) driven by our scripted model, with our
``yaoyao-bot-bridge`` plugin installed: http, a streamed gateway turn, a tool turn, an approval,
an interrupt, a close, and team tools (lease.create + lease.bind through our plugin, the model's
calls counted at every hop). One Hermes, one control plane and one runner for the module."""
from __future__ import annotations

import base64
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from fixtures.real_hermes import Call, Rule, Say, Script, find_hermes

from .real_world import PLUGIN, World, real_world, turn, types_of, wait_event

HERMES_BIN, SKIP_REASON = find_hermes()
pytestmark = [
    pytest.mark.skipif(HERMES_BIN is None, reason=SKIP_REASON),
    pytest.mark.asyncio(loop_scope="module"),
    pytest.mark.slow,
    pytest.mark.xdist_group("real_hermes"),  # with --dist loadgroup: one Hermes for the module
]

DANGER = "rm -rf /tmp/real-hermes-conformance-nonexistent-dir-xyz"
SCRIPT = Script(rules=(
    Rule("PING", (Say("Hello from the fake model. PONG-42", chunks=4),)),
    Rule("TOOLTEST", (Call("terminal", {"command": "echo tool-ran-42"}), Say("Tool done."))),
    Rule("DANGERTEST", (Call("terminal", {"command": DANGER}), Say("Cleaned up."))),
    Rule("SLOWTEST", (Say("word " * 400, chunks=200, delay=0.05),)),
    Rule("TEAMTEST", (Call("create_member", {"name": "Ada", "role": "reviewer"}),
                      Call("form_team", {"members": ["Ada"]}), Say("Team is ready."))),
))
TOOLS = [
    {"id": "ws.create_member", "name": "create_member", "description": "Create a member",
     "inputSchema": {"type": "object", "properties": {"name": {"type": "string"},
                                                      "role": {"type": "string"}}}},
    {"id": "ws.form_team", "name": "form_team", "description": "Form a team",
     "inputSchema": {"type": "object", "properties": {"members": {"type": "array"}}}},
]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def world(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[World]:
    # HERMES_TUI_TOOLSETS=all: every session's agent starts with EVERY registered tool, ours
    # included, so only the plugin's per-turn re-sync keeps them to the bound session.
    async with real_world(SCRIPT,
                          hermes_env={"HERMES_TUI_TOOLSETS": "all"}) as w:
        yield w


async def test_http_reads(world: World) -> None:
    status = await world.cp.command(world.runner_id, "http",
                                    {"path": "/api/status", "method": "GET"}, account="alice")
    assert status.ok and status.result["status"] == 200, status
    assert json.loads(base64.b64decode(status.result["body"]))["auth_required"] is False
    profiles = await world.cp.command(world.runner_id, "http",
                                      {"path": "/api/profiles", "method": "GET"}, account="alice")
    assert profiles.ok and profiles.result["status"] == 200, profiles
    names = [p["name"] for p in json.loads(base64.b64decode(profiles.result["body"]))["profiles"]]
    assert names == ["default"]
    caps = await world.cp.command(world.runner_id, "http", {
        "path": PLUGIN + "/capabilities", "method": "GET", "search": "?profile=default"},
        account="alice", profile="default")
    assert caps.ok and caps.result["status"] == 200, caps
    body = json.loads(base64.b64decode(caps.result["body"]))
    assert {k: body[k] for k in ("version", "ready", "in_process", "native_tools")} == {
        "version": 1, "ready": True, "in_process": True, "native_tools": True}


async def test_streamed_gateway_turn(world: World) -> None:
    ch = await world.channel()
    sid, _ = await world.session(ch, "streamed")
    before = len(world.model.turn_calls)
    done, mark = await turn(world, ch, sid, "PING please")
    assert done["payload"]["status"] == "complete"
    assert "PONG-42" in done["payload"]["text"]
    deltas = [e for e in ch.events[mark:] if e["type"] == "message.delta"
              and e.get("session_id") == sid]
    assert deltas and "PONG-42" in "".join(e["payload"]["text"] for e in deltas)
    served = world.model.turn_calls[before:]
    assert served and all(c.stream for c in served)  # real Hermes streams its turns
    assert (await world.cp.close_channel(ch)).ok


async def test_tool_turn_runs_the_terminal_tool(world: World) -> None:
    ch = await world.channel()
    sid, _ = await world.session(ch, "tool")
    done, mark = await turn(world, ch, sid, "TOOLTEST")
    assert done["payload"]["status"] == "complete" and "Tool done." in done["payload"]["text"]
    kinds = types_of(ch, sid, mark)
    assert "tool.start" in kinds and "tool.complete" in kinds
    complete = next(e for e in ch.events[mark:] if e["type"] == "tool.complete"
                    and e.get("session_id") == sid)
    assert complete["payload"]["name"] == "terminal"
    assert "tool-ran-42" in json.dumps(complete["payload"].get("result"))
    assert (await world.cp.close_channel(ch)).ok


async def test_approval_round_trip(world: World) -> None:
    ch = await world.channel()
    sid, _ = await world.session(ch, "approval")
    mark = len(ch.events)
    assert (await world.cp.rpc(ch, "prompt.submit", {"session_id": sid,
                                                     "text": "DANGERTEST"})).ok
    asked, _ = await wait_event(ch, "approval.request", sid, mark)
    assert asked["payload"]["command"] == DANGER
    assert "once" in asked["payload"]["choices"]
    answered = await world.cp.rpc(ch, "approval.respond", {"session_id": sid, "choice": "once"})
    assert answered.ok and answered.result == {"resolved": 1}, answered
    done, _ = await wait_event(ch, "message.complete", sid, mark, 60)
    assert done["payload"]["status"] == "complete"
    assert "tool.complete" in types_of(ch, sid, mark)
    assert (await world.cp.close_channel(ch)).ok


async def test_interrupt_mid_stream_then_close(world: World) -> None:
    ch = await world.channel()
    sid, _ = await world.session(ch, "interrupt")
    mark = len(ch.events)
    assert (await world.cp.rpc(ch, "prompt.submit", {"session_id": sid, "text": "SLOWTEST"})).ok
    await wait_event(ch, "message.delta", sid, mark)
    stopped = await world.cp.rpc(ch, "session.interrupt", {"session_id": sid})
    assert stopped.ok and stopped.result.get("status") == "interrupted", stopped
    done, _ = await wait_event(ch, "message.complete", sid, mark)
    assert done["payload"]["status"] == "interrupted"
    assert len(done["payload"].get("text") or "") < len("word " * 400)
    closed = await world.cp.rpc(ch, "session.close", {"session_id": sid})
    assert closed.ok and closed.result == {"closed": True}, closed
    assert (await world.cp.close_channel(ch)).ok


async def test_team_tools_through_our_plugin(world: World) -> None:
    """lease.create + lease.bind reach our plugin; the model's two calls go model → Hermes →
    plugin → the runner's listener → ``tool`` → control plane; counted at every hop. An unbound
    session never sees the tools; a second concurrent grant gets distinct native names; after
    lease.close the tools are gone and nothing more is executed."""
    executed: list[tuple[str, dict[str, Any]]] = []

    def handler(tool_id: str, arguments: dict[str, Any]) -> dict[str, Any]:
        executed.append((tool_id, arguments))
        return {"ok": True, "tool": tool_id}

    w = world
    ch = await w.channel()
    sid, stored = await w.session(ch, "team")
    lease = await w.cp.create_lease(ch, profile="default", tools=TOOLS, handlers={"*": handler},
                                    session={"runtimeId": sid, "storedId": stored})
    t0 = time.monotonic()
    bound = await w.cp.bind_lease(lease)
    w.timings["lease_bind_s"] = time.monotonic() - t0
    assert bound.ok, bound  # stock Hermes: 502 team_tools_bind_failed ("Plugin not found")
    stats0 = await w.plugin_stats()
    assert stats0["binds"] == 1 and len(stats0["native_tools"]) == 2
    grant1 = set(stats0["native_tools"])
    assert all(n.startswith("yaoyao_workspace_") for n in grant1)

    tool_route0 = len(w.cp.history.filter(route="tool"))
    model0 = len(w.model.tool_calls())
    t0 = time.monotonic()
    done, _ = await turn(w, ch, sid, "TEAMTEST")
    w.timings["team_turn_s"] = time.monotonic() - t0
    assert done["payload"]["status"] == "complete" and "Team is ready." in done["payload"]["text"]
    stats1 = await w.plugin_stats()
    hops = {
        "model_tool_calls": len(w.model.tool_calls()) - model0,
        "plugin_forwarded": stats1.get("calls_forwarded", 0),
        "runner_listener_ok": stats1.get("listener_ok", 0),
        "control_plane_tool_route": len(w.cp.history.filter(route="tool")) - tool_route0,
        "control_plane_executions": lease.executions,
    }
    w.timings.update({f"hops.{k}": v for k, v in hops.items()})
    assert hops == {"model_tool_calls": 2, "plugin_forwarded": 2, "runner_listener_ok": 2,
                    "control_plane_tool_route": 2, "control_plane_executions": 2}, hops
    assert [t for t, _ in executed] == ["ws.create_member", "ws.form_team"]
    assert executed[0][1] == {"name": "Ada", "role": "reviewer"}
    offered = {n for c in w.model.tool_calls()[model0:] for n in c.offered}
    assert grant1 <= offered  # the bound session's requests offered the native tools

    # An unbound session in the same Hermes: no native tools offered, nothing forwarded.
    ch2 = await w.channel()
    sid2, _ = await w.session(ch2, "unbound")
    seen = len(w.model.calls)
    done2, _ = await turn(w, ch2, sid2, "TEAMTEST")
    assert done2["payload"]["status"] == "complete"
    unbound_offers = {n for c in w.model.calls[seen:] if not c.side for n in c.offered}
    assert not any(n.startswith("yaoyao_workspace_") for n in unbound_offers)
    stats2 = await w.plugin_stats()
    assert stats2.get("calls_forwarded", 0) == 2
    assert len(w.cp.history.filter(route="tool")) - tool_route0 == 2

    # A second, concurrent grant (another session): distinct native names.
    sid3, stored3 = await w.session(ch2, "second grant")
    lease2 = await w.cp.create_lease(ch2, profile="default", tools=TOOLS,
                                     session={"runtimeId": sid3, "storedId": stored3})
    assert (await w.cp.bind_lease(lease2)).ok
    grant2 = set((await w.plugin_stats())["native_tools"]) - grant1
    assert len(grant2) == 2 and not grant1 & grant2

    # Revoked: lease.close unbinds; the tools leave the session, nothing more is executed.
    assert (await w.cp.close_lease(lease)).ok
    assert (await w.plugin_stats())["unbinds"] >= 1
    seen = len(w.model.calls)
    done3, _ = await turn(w, ch, sid, "TEAMTEST")
    assert done3["payload"]["status"] == "complete"
    assert not grant1 & {n for c in w.model.calls[seen:] for n in c.offered}
    assert lease.executions == 2 and len(executed) == 2
    assert (await w.plugin_stats()).get("calls_forwarded", 0) == 2
    assert (await w.cp.close_lease(lease2)).ok
    assert (await w.cp.close_channel(ch2)).ok
    assert (await w.cp.close_channel(ch)).ok
