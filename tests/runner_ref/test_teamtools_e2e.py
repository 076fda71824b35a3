"""Team tools end to end: fake control plane → runner_ref (subprocess) → scripted Hermes plugin →
the runner's loopback listener → the control plane's ``tool`` route, over real sockets."""
from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from fixtures import ScriptedHermes

from .integration import rig

pytestmark = pytest.mark.timeout(90)

TOOLS = [{"id": "yaoyao_workspace_create_member", "name": "create_member",
          "description": "Create a team member", "inputSchema": {"type": "object"}},
         {"id": "yaoyao_workspace_form_team", "name": "form_team",
          "description": "Form a team", "inputSchema": {"type": "object"}}]


async def test_a_leased_tool_call_goes_through_the_runner_listener(tmp_path: Path) -> None:
    seen: list[tuple[str, dict[str, Any]]] = []

    def handler(tool_id: str, arguments: dict[str, Any]) -> Any:
        seen.append((tool_id, arguments))
        return {"ok": True, "tool": tool_id}

    async with ScriptedHermes("team", time_scale=0) as hermes, \
            rig(tmp_path, hermes.url) as r:
        cp = r.cp
        ch = await cp.open_channel(r.runner_id, account="alice", profile="default")
        created = await cp.rpc(ch, "session.create", {"profile": "default", "title": "t"})
        assert created.ok, created
        session = {"runtimeId": created.result["session_id"],
                   "storedId": created.result["stored_session_id"]}
        lease = await cp.create_lease(ch, profile="default", session=session, tools=TOOLS,
                                      handlers={"*": handler}, workspaceMemory=True)
        assert lease.create_outcome is not None and lease.create_outcome.result == {"ok": True}
        bound = await cp.bind_lease(lease)
        assert bound.ok and bound.result == {"ok": True}, bound
        bind = await hermes.effects.wait_for("bind", timeout=10)
        assert bind.session_id == session["runtimeId"]
        assert bind.stored_session_id == session["storedId"]
        binding = hermes.bridge.bindings[session["runtimeId"]]
        assert binding["native_tools"] is True and binding["workspace_memory"] is True
        assert binding["generation"].startswith(f"{lease.lease_id}:")  # workId defaults to it
        assert binding["bridge_url"].startswith("http://127.0.0.1:")

        submitted = await cp.rpc(ch, "prompt.submit",
                                 {"session_id": session["runtimeId"], "text": "TEAMTEST"})
        assert submitted.ok, submitted
        await ch.next_event("message.complete", timeout=20)
        # The control plane saw the REAL tool ids; the model only the opaque ones.
        assert [t for t, _ in seen] == ["yaoyao_workspace_create_member",
                                        "yaoyao_workspace_form_team"]
        assert seen[0][1] == {"name": "Ada", "role": "reviewer"}
        called = hermes.effects.of("team_tool.called")
        assert len(called) == 2
        for effect in called:
            assert effect.detail["tool_id"].startswith("team_") and effect.detail["status"] == 200
            assert binding["token"] not in json.dumps(effect.to_json())
        tool_posts = [ex for ex in cp.history if ex.route == "tool"]
        assert {ex.request_body["leaseId"] for ex in tool_posts} == {lease.lease_id}

        closed = await cp.close_lease(lease)
        assert closed.ok and closed.result == {"ok": True}
        await hermes.effects.wait_for("unbind", timeout=10)
        port = int(binding["bridge_url"].rsplit(":", 1)[1])
        with pytest.raises(OSError):
            await asyncio.open_connection("127.0.0.1", port)


async def test_a_repeated_call_id_reaches_the_control_plane_once(tmp_path: Path) -> None:
    seen: list[str] = []

    def handler(tool_id: str, arguments: dict[str, Any]) -> Any:
        seen.append(tool_id)
        return {"content": [{"type": "text", "text": f"made {arguments['name']}"}]}

    async with ScriptedHermes("team", time_scale=0) as hermes, \
            rig(tmp_path, hermes.url) as r:
        ch = await r.cp.open_channel(r.runner_id, account="alice", profile="default")
        created = await r.cp.rpc(ch, "session.create", {"profile": "default", "title": "t"})
        session = {"runtimeId": created.result["session_id"],
                   "storedId": created.result["stored_session_id"]}
        lease = await r.cp.create_lease(ch, profile="default", session=session, tools=TOOLS,
                                        handlers={"*": handler})
        assert (await r.cp.bind_lease(lease)).ok
        await r.cp.rpc(ch, "prompt.submit", {"session_id": session["runtimeId"], "text": "TEAMDUP"})
        await ch.next_event("message.complete", timeout=20)
        called = hermes.effects.of("team_tool.called")
        assert len(called) == 2 and seen == ["yaoyao_workspace_create_member"]
        # A content array passes through unchanged, and both calls share it.
        assert called[0].detail["result"] == called[1].detail["result"] == {
            "content": [{"type": "text", "text": "made Bob"}]}
        await r.cp.close_channel(ch)  # gateway.close disposes the channel's lease too
        await hermes.effects.wait_for("unbind", timeout=10)
