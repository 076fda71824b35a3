"""Shared pieces of the runner_ref integration tests: a control plane, a runner subprocess."""
from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fake_server import ControlPlane, Timings

from .runner_proc import RunnerProcess, write_config

FAST = Timings(poll_hold=2.0, redelivery=5.0, watchdog_tick=0.5, offline_after=10.0)


@dataclass
class Rig:
    cp: ControlPlane
    runner_id: str
    token: str
    config: dict[str, Any]
    config_path: Path
    runner: RunnerProcess

    async def restart(self, env: dict[str, str] | None = None,
                      faketime_offset: float | None = None) -> RunnerProcess:
        self.runner = await RunnerProcess(self.config_path, env=env,
                                          faketime_offset=faketime_offset).start()
        await self.runner.wait_output("connected", timeout=15)  # the new instance fenced the old
        return self.runner

    def all_output(self) -> bytes:
        out = b""
        for p in sorted(self.config_path.parent.glob("runner-*.std*")):
            out += p.read_bytes()
        return out


@contextlib.asynccontextmanager
async def rig(tmp_path: Path, hermes_url: str, *, profiles: tuple[str, ...] = ("default",),
              artifact_roots: tuple[str, ...] = (), timings: Timings = FAST,
              start: bool = True, env: dict[str, str] | None = None) -> AsyncIterator[Rig]:
    async with ControlPlane(timings=timings) as cp:
        reg = await cp.register_runner(name="r1", allowed_profiles=list(profiles))
        await cp.create_account("alice", allowed_profiles=list(profiles))
        cfg = reg.runner_config(hermes_url=hermes_url, artifact_roots=list(artifact_roots))
        path = write_config(tmp_path / "node", cfg)
        r = Rig(cp, reg.runner_id, reg.token, cfg, path, RunnerProcess(path, env=env))
        try:
            if start:
                await r.runner.start()
                await cp.wait_online(reg.runner_id, timeout=10)
            yield r
        finally:
            await r.runner.reap()
            assert reg.token.encode() not in r.all_output(), "runner token leaked to output"


async def replay(cp: ControlPlane, runner_id: str, wire: dict[str, Any],
                 payload: dict[str, Any] | None = None) -> Any:
    """Queue ``wire`` again with its own id and expiresAt (``ControlPlane.replay``), so a
    restarted runner sees the *same* command again."""
    handle = await cp.replay(runner_id, wire, account="alice", payload=payload)
    if handle.done():
        raise AssertionError(f"replay refused at enqueue: {handle.outcome}")
    return handle


def delivered(cp: ControlPlane, kind: str | None = None) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for ex in cp.history:
        for c in ex.commands:
            if kind is None or c.get("kind") == kind:
                out.append(c)
    return out
