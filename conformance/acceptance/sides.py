"""How each variant's Hermes counts the tool calls (``drive.HermesSide``).

- scripted (``fixtures.hermes.ScriptedHermes``): the model's decisions are the script's
  ``team_tool`` steps (effects ``team_tool.called`` + ``team_tool.unavailable``); the plugin's
  forwards are its ``/tools/call`` exchanges; the listener's answers those with status 200.
- real (``fixtures.real_hermes``): the model's decisions are the scripted model server's tool
  calls; the plugin's forwards and the listener's 200 answers are our plugin's own counters
  (``GET /api/plugins/yaoyao-bot-bridge/stats``, straight from Hermes, not through the runner).
"""
from __future__ import annotations

from typing import Any

import aiohttp

PLUGIN = "/api/plugins/yaoyao-bot-bridge"


class ScriptedSide:
    name = "scripted"
    idle_after_complete = False   # a scripted turn is over when its message.complete is sent

    def __init__(self, hermes: Any) -> None:
        self.hermes = hermes

    def session_params(self) -> dict[str, Any]:
        return {}

    async def hermes_hops(self) -> dict[str, int]:
        fx = self.hermes.effects
        forwarded = [c for c in self.hermes.bridge.calls if c.path == "/tools/call"]
        return {"model_calls": fx.count("team_tool.called") + fx.count("team_tool.unavailable"),
                "plugin_forwarded": len(forwarded),
                "listener_answered": sum(1 for c in forwarded if c.status == 200)}

    async def unbinds(self) -> int:
        return int(self.hermes.effects.count("unbind"))

    def report_seen(self, session_id: str, text: str) -> bool:
        return any(e.detail.get("text") == text
                   for e in self.hermes.effects.of("prompt.accepted", session_id=session_id))


class RealSide:
    name = "real"
    idle_after_complete = True

    def __init__(self, hermes: Any, model: Any) -> None:
        self.hermes, self.model = hermes, model

    def session_params(self) -> dict[str, Any]:
        return {"cwd": str(self.hermes.workdir)}

    async def stats(self) -> dict[str, Any]:
        async with aiohttp.ClientSession() as http, http.get(
                self.hermes.url + PLUGIN + "/stats",
                headers={"X-Hermes-Session-Token": self.hermes.session_token}) as resp:
            assert resp.status == 200
            return dict(await resp.json())

    async def hermes_hops(self) -> dict[str, int]:
        s = await self.stats()
        return {"model_calls": len(self.model.tool_calls()),
                "plugin_forwarded": int(s.get("calls_forwarded", 0)),
                "listener_answered": int(s.get("listener_ok", 0))}

    async def unbinds(self) -> int:
        return int((await self.stats()).get("unbinds", 0))

    def report_seen(self, session_id: str, text: str) -> bool:
        # The model server cannot tell sessions apart; the stored transcript (read through the
        # runner) says which session holds the report.
        return any(c.user_text == text for c in self.model.turn_calls)
