"""One world for the real-Hermes tests: the scripted model, a real Hermes (with or without our
plugin), fake_server's ControlPlane in process and the runner under test as a subprocess.
At exit every runner/Hermes output and Hermes log is scanned for the runner token and the
Hermes session token."""
from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import aiohttp

from conformance.adapter import RunnerUnderTest
from conformance.reference_cmd import REFERENCE_RUNNER_CMD
from fake_server import Channel, ControlPlane, Timings
from fixtures.real_hermes import ModelServer, RealHermes, Script

FAST = Timings(poll_hold=2.0, redelivery=5.0, watchdog_tick=0.5, offline_after=10.0)
PLUGIN = "/api/plugins/yaoyao-bot-bridge"


@dataclass
class World:
    model: ModelServer
    hermes: RealHermes
    cp: ControlPlane
    runner: RunnerUnderTest
    runner_id: str
    timings: dict[str, float]

    async def plugin_stats(self) -> dict[str, Any]:
        """Straight from Hermes (not through the runner): the plugin's own counters."""
        async with aiohttp.ClientSession() as http, http.get(
                self.hermes.url + PLUGIN + "/stats",
                headers={"X-Hermes-Session-Token": self.hermes.session_token}) as resp:
            assert resp.status == 200
            return dict(await resp.json())

    async def channel(self) -> Channel:
        return await self.cp.open_channel(self.runner_id, account="alice", profile="default")

    async def session(self, ch: Channel, title: str) -> tuple[str, str]:
        made = await self.cp.rpc(ch, "session.create", {
            "profile": "default", "title": title, "cols": 100,
            "cwd": str(self.hermes.workdir)})
        assert made.ok, made
        return made.result["session_id"], made.result["stored_session_id"]


@contextlib.asynccontextmanager
async def real_world(script: Script, *, plugin: bool = True,
                     hermes_env: dict[str, str] | None = None) -> AsyncIterator[World]:
    timings: dict[str, float] = {}
    async with ModelServer(script) as model, \
            RealHermes(model.base_url, plugin=plugin, extra_env=hermes_env) as hermes, \
            ControlPlane(timings=FAST) as cp:
        timings["hermes_start_s"] = round(hermes.startup_seconds or 0.0, 2)
        reg = await cp.register_runner(name="real", allowed_profiles=["default"])
        await cp.create_account("alice", allowed_profiles=["default"])
        runner = RunnerUnderTest(REFERENCE_RUNNER_CMD, reg.runner_config(hermes_url=hermes.url))
        t0 = time.monotonic()
        await runner.start()
        try:
            await runner.wait_online(cp, reg.runner_id, timeout=15)
            timings["runner_online_s"] = round(time.monotonic() - t0, 2)
            yield World(model, hermes, cp, runner, reg.runner_id, timings)
        finally:
            await runner.stop()
            await runner.close()
            leaked = runner.output() + hermes.output()
            for log in hermes.home.rglob("*.log"):
                leaked += log.read_bytes()
            for secret in (reg.token, hermes.session_token):
                assert secret.encode() not in leaked, "a secret reached an output or a log"
            # The lease tokens the runner minted are unknown here; no bearer header may show.
            assert b"Bearer " not in leaked, "an Authorization header reached a log"
            print(f"\nreal-hermes timings: {json.dumps(timings)}")


async def wait_event(ch: Channel, type_: str, sid: str, after: int,
                     timeout: float = 30.0) -> tuple[dict[str, Any], int]:
    """The first event of ``type_`` for session ``sid`` at index ≥ ``after``."""
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    i = after
    while True:
        ev = await ch.next_event(type_, timeout=max(0.1, end - loop.time()), after=i)
        idx = next(k for k in range(i, len(ch.events)) if ch.events[k] is ev)
        if ev.get("session_id") == sid:
            return ev, idx
        i = idx + 1


async def turn(w: World, ch: Channel, sid: str, text: str, timeout: float = 60.0
               ) -> tuple[dict[str, Any], int]:
    mark = len(ch.events)
    sent = await w.cp.rpc(ch, "prompt.submit", {"session_id": sid, "text": text})
    assert sent.ok and sent.result == {"status": "streaming"}, sent
    done, _ = await wait_event(ch, "message.complete", sid, mark, timeout)
    return done, mark


def types_of(ch: Channel, sid: str, after: int) -> list[str]:
    return [e["type"] for e in ch.events[after:] if e.get("session_id") == sid]
