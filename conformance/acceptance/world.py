"""One acceptance world: a Hermes (scripted or real), the control plane in process and the
runner under test as a black box through the one adapter (:class:`conformance.adapter.
RunnerUnderTest`: ``runner.json`` 0600 in a private temp dir, own process group, output kept in
memory). The command is the plugin's ``--runner-cmd`` (default: the reference runner). At exit
every runner output (and every real-Hermes output and log) is scanned for the runner token and
Hermes' secrets."""
from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass

import pytest

from fake_server import ControlPlane, Timings

from ..adapter import RunnerUnderTest
from ..reference_cmd import REFERENCE_RUNNER_CMD
from ..results import redact
from .scenario import ADMINS, PROFILE

FAST = Timings(poll_hold=2.0, redelivery=5.0, watchdog_tick=0.5, offline_after=10.0)


def runner_command(config: pytest.Config) -> str:
    """``--runner-cmd`` of this pytest run, or the reference runner."""
    try:
        given = config.getoption("runner_cmd")
    except ValueError:          # the conformance plugin is not loaded
        given = None
    return str(given or REFERENCE_RUNNER_CMD)


@dataclass
class Plane:
    cp: ControlPlane
    runner_id: str
    runner: RunnerUnderTest
    online_s: float
    secrets: frozenset[str] = frozenset()


def plane_diagnosis(p: Plane, secrets: Iterable[str] = (), lines: int = 40) -> str:
    """For a failed run: how each channel closed (why, from the control plane's lifecycle log),
    epoch changes and local disconnects, every machine exchange not answered 200 (route, status,
    code, fault) and the runner's last output lines —
    with every secret of the world redacted."""
    kinds = ("channel_closed", "epoch_changed", "disconnected", "instance_fenced")
    facts = [f"  #{f.seq} {f.kind} {f.connection_id or ''} {f.reason or ''} {f.detail or ''}".rstrip()
             for f in p.cp.lifecycle.filter(runner_id=p.runner_id) if f.kind in kinds]
    failed = [f"  #{x.seq} {x.route} {x.status} {x.code or ''} {x.fault or ''} "
              f"{x.connection_id or ''}".rstrip()
              for x in p.cp.history.filter(runner_id=p.runner_id,
                                           where=lambda x: x.status != 200)]
    text = redact(p.runner.output().decode(errors="replace"), {*secrets, *p.secrets})
    tail = "\n".join(text.splitlines()[-lines:])
    return (f"control plane facts ({len(facts)}):\n" + "\n".join(facts[-lines:])
            + f"\nmachine exchanges not answered 200 ({len(failed)}):\n"
            + "\n".join(failed[-lines:])
            + f"\nrunner output (last {lines} lines):\n{tail}")


@contextlib.asynccontextmanager
async def plane(hermes_url: str, runner_cmd: str, secrets: Callable[[], Iterable[str]],
                extra_output: Callable[[], bytes] | None = None) -> AsyncIterator[Plane]:
    async with ControlPlane(timings=FAST) as cp:
        reg = await cp.register_runner(name="acceptance", allowed_profiles=[PROFILE])
        for name in ADMINS:
            await cp.create_account(name, allowed_profiles=[PROFILE])
        async with RunnerUnderTest(runner_cmd, reg.runner_config(hermes_url=hermes_url),
                                   name="runner under test") as runner:
            t0 = time.monotonic()
            await runner.start()
            try:
                await runner.wait_online(cp, reg.runner_id, timeout=30)
                yield Plane(cp, reg.runner_id, runner, time.monotonic() - t0,
                            frozenset({reg.token}))
            finally:
                await runner.stop()
                out = runner.output() + (extra_output() if extra_output else b"")
                for secret in {reg.token, *secrets()}:
                    assert secret.encode() not in out, "a secret reached the runner's output"
                assert b"Bearer " not in out, "an Authorization header reached an output"
