"""Stock Hermes 0.19.0 (our plugin NOT installed): the plugin routes answer 404 "Plugin not
found", so the runner's lease.bind fails with team_tools_bind_failed. The same steps pass with
our plugin (test_runner_real_hermes), so the plugin is what makes the difference."""
from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from fixtures.real_hermes import Rule, Say, Script, find_hermes

from .real_world import PLUGIN, real_world

HERMES_BIN, SKIP_REASON = find_hermes()
pytestmark = [pytest.mark.skipif(HERMES_BIN is None, reason=SKIP_REASON), pytest.mark.slow]
TOOLS = [{"id": "ws.create_member", "name": "create_member", "inputSchema": {"type": "object"}}]


async def test_stock_hermes_refuses_the_bind(tmp_path: Path) -> None:
    async with real_world(Script(rules=(Rule("PING", (Say("PONG"),)),)),
                          plugin=False) as w:
        caps = await w.cp.command(w.runner_id, "http", {
            "path": PLUGIN + "/capabilities", "method": "GET", "search": "?profile=default"},
            account="alice", profile="default")
        assert caps.ok and caps.result["status"] == 404, caps
        assert json.loads(base64.b64decode(caps.result["body"])) == {"detail": "Plugin not found"}
        ch = await w.channel()
        sid, stored = await w.session(ch, "stock")
        lease = await w.cp.create_lease(ch, profile="default", tools=TOOLS,
                                        session={"runtimeId": sid, "storedId": stored})
        bound = await w.cp.bind_lease(lease)
        assert (bound.ok, bound.status, bound.code) == (False, 502, "team_tools_bind_failed")
        assert (await w.cp.close_channel(ch)).ok
