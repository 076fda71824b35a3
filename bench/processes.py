"""The processes an end-to-end bench measures: the scripted Hermes and ``runner_ref``, each a
subprocess in its own process group (through the one process helper and the black-box runner
adapter), and the CPU seconds each one spends (Linux ``/proc``).
"""
from __future__ import annotations

import os
import shlex
import sys
import time
from pathlib import Path
from typing import Any

from conformance.adapter import RunnerUnderTest
from conformance.process import Process, scrubbed_env
from conformance.reference_cmd import reference_runner_cmd

REPO = Path(__file__).resolve().parents[1]  # the checkout whose runner_ref the subprocesses run

FAST_ENV = {"RUNNER_REF_TEST_RECONNECT_DELAY": "0.1"}


class Hermes:
    """The scripted Hermes as a subprocess (so the three parts spread over the cores), through
    the one process helper; ready when it prints its ``HERMES_BACKEND_READY`` line."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.process: Process | None = None
        self.url = ""

    async def start(self) -> None:
        env = scrubbed_env({"PYTHONPATH": str(REPO),
                            "HERMES_DASHBOARD_SESSION_TOKEN": os.urandom(24).hex()})
        self.process = Process(
            [sys.executable, "-m", "fixtures.scripted_hermes", "--host", "127.0.0.1", "--port",
             "0", "--script", "plain", "--time-scale", "0"],
            env=env, cwd=REPO, tee_dir=self.workdir, tee_stem="hermes")
        await self.process.start()
        line = await self.process.wait_line("HERMES_DASHBOARD_READY", 20, stream="stdout")
        self.url = f"http://127.0.0.1:{int(line.rsplit('port=', 1)[1])}"

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    async def stop(self) -> None:
        if self.process is not None:
            await self.process.stop()


class Runner:
    """``python -m runner_ref --config {config}`` through the black-box adapter (its own process
    group; runner.json in a private temp directory removed at :meth:`stop`)."""

    def __init__(self, workdir: Path, config: dict[str, Any], profile: str | None,
                 switch_interval: float | None = None, src: Path = REPO) -> None:
        self.workdir, self.profile = workdir, profile
        self.src = src  # the directory holding the runner_ref package (A/B against a copy)
        template = reference_runner_cmd()
        if profile:
            template = reference_runner_cmd("-m", "cProfile", "-o", str(Path(profile).resolve()))
        elif switch_interval is not None:
            py = shlex.quote(sys.executable)
            code = ("import runpy, sys; sys.setswitchinterval(float(sys.argv[1])); "
                    "sys.argv = ['runner_ref', *sys.argv[2:]]; "
                    "runpy.run_module('runner_ref', run_name='__main__', alter_sys=True)")
            template = f"{py} -c {shlex.quote(code)} {switch_interval} --config {{config}}"
        self.adapter = RunnerUnderTest(template, config,
                                       env={**FAST_ENV, "PYTHONPATH": str(src)})

    async def start(self) -> None:
        await self.adapter.start()

    @property
    def pid(self) -> int | None:
        return self.adapter.pid if self.adapter.process else None

    async def stop(self) -> int | None:
        """SIGTERM → wait → SIGKILL; keeps the (redacted) stderr as ``runner.stderr``."""
        try:
            return await self.adapter.stop()
        finally:
            (self.workdir / "runner.stderr").write_text(self.adapter.stderr_text())
            await self.adapter.close()


def user_system(pid: int | None) -> tuple[float, float]:
    """(user, system) CPU seconds of a process, threads included (Linux /proc)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        tick = os.sysconf("SC_CLK_TCK")
        return int(fields[11]) / tick, int(fields[12]) / tick
    except (OSError, IndexError, ValueError):
        return float("nan"), float("nan")


def cpu_seconds(pid: int | None) -> float:
    """user + system CPU seconds of a process (Linux /proc); our own process when ``pid`` is None."""
    if pid is None:
        return time.process_time()
    return sum(user_system(pid))
