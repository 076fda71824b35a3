"""One acceptance world: a Hermes (scripted or real), the control plane in process and the
runner under test as a subprocess. At exit every runner output (and every real-Hermes output
and log) is scanned for the runner token and Hermes' secrets."""
from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from fake_server import ControlPlane, Timings

from .launch import RunnerProcess
from .scenario import ADMINS, PROFILE

FAST = Timings(poll_hold=2.0, redelivery=5.0, watchdog_tick=0.5, offline_after=10.0)


@dataclass
class Plane:
    cp: ControlPlane
    runner_id: str
    runner: RunnerProcess
    online_s: float


@contextlib.asynccontextmanager
async def plane(hermes_url: str, node_dir: Path, secrets: Callable[[], Iterable[str]],
                extra_output: Callable[[], bytes] | None = None) -> AsyncIterator[Plane]:
    async with ControlPlane(timings=FAST) as cp:
        reg = await cp.register_runner(name="acceptance", allowed_profiles=[PROFILE])
        for name in ADMINS:
            await cp.create_account(name, allowed_profiles=[PROFILE])
        runner = RunnerProcess(reg.runner_config(hermes_url=hermes_url), node_dir)
        t0 = time.monotonic()
        await runner.start()
        try:
            await cp.wait_online(reg.runner_id, timeout=30)
            yield Plane(cp, reg.runner_id, runner, time.monotonic() - t0)
        finally:
            await runner.stop()
            out = runner.output() + (extra_output() if extra_output else b"")
            for secret in {reg.token, *secrets()}:
                assert secret.encode() not in out, "a secret reached the runner's output"
            assert b"Bearer " not in out, "an Authorization header reached an output"
