"""Team-tool leases through the runner process: lease.create → lease.bind (plugin bind) →
the model's tool calls over the loopback listener → relayed through ``tool`` → lease.close."""
from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

from fixtures import ScriptedHermes

from .integration import rig

TOOLS = [
    {"id": "ws.create_member", "name": "create_member", "description": "Create a member",
     "inputSchema": {"type": "object"}},
    {"id": "ws.form_team", "name": "form_team", "description": "Form a team",
     "inputSchema": {"type": "object"}},
]


async def test_lease_lifecycle_and_relay(tmp_path: Path) -> None:
    calls: list[tuple[str, dict[str, Any]]] = []

    def handler(tool_id: str, arguments: dict[str, Any]) -> dict[str, Any]:
        calls.append((tool_id, arguments))
        return {"ok": True, "tool": tool_id}

    async with ScriptedHermes("team") as hermes, rig(tmp_path, hermes.url) as r:
        cp = r.cp
        ch = await cp.open_channel(r.runner_id, account="alice", profile="default")
        made = await cp.rpc(ch, "session.create", {"profile": "default", "title": "team"})
        assert made.ok
        sid, stored = made.result["session_id"], made.result["stored_session_id"]
        session = {"runtimeId": sid, "storedId": stored}
        lease = await cp.create_lease(ch, profile="default", session=session, tools=TOOLS,
                                      handlers={"*": handler})
        bound = await cp.bind_lease(lease)
        assert bound.ok, bound
        await hermes.effects.wait_for("bind", timeout=5)
        assert (await cp.rpc(ch, "prompt.submit", {"session_id": sid, "text": "TEAMTEST"})).ok
        done = await ch.next_event("message.complete", timeout=15)
        assert done["payload"]["status"] == "complete"
        assert [c[0] for c in calls] == ["ws.create_member", "ws.form_team"]
        forbidden = await cp.create_lease(ch, profile="default", check=False,
                                          session={"runtimeId": "deadbeef", "storedId": "x"},
                                          tools=TOOLS)
        assert forbidden.create_outcome is not None
        assert forbidden.create_outcome.code == "runner_session_forbidden"
        closed = await cp.close_lease(lease)
        assert closed.ok
        await hermes.effects.wait_for("unbind", timeout=5)


async def test_sigterm_disposes_leases_and_closes_channels(tmp_path: Path) -> None:
    async with ScriptedHermes("team") as hermes, rig(tmp_path, hermes.url) as r:
        cp = r.cp
        ch = await cp.open_channel(r.runner_id, account="alice", profile="default")
        made = await cp.rpc(ch, "session.create", {"profile": "default", "title": "team"})
        assert made.ok
        session = {"runtimeId": made.result["session_id"],
                   "storedId": made.result["stored_session_id"]}
        lease = await cp.create_lease(ch, profile="default", session=session, tools=TOOLS)
        assert (await cp.bind_lease(lease)).ok
        await hermes.effects.wait_for("bind", timeout=5)
        assert hermes.effects.count("unbind") == 0
        r.runner.signal(signal.SIGTERM)
        assert await r.runner.wait(10) == 0
        assert "stopped" in r.runner.stderr()
        await hermes.effects.wait_for("unbind", timeout=5)    # the lease was disposed
        await hermes.effects.wait_for("ws.closed", timeout=5)  # and the channel closed
