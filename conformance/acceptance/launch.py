"""Start the runner under test as a black box: ``python -m runner_ref --config runner.json`` (or
``$RUNNER_UNDER_TEST_CMD``, split on spaces, before ``--config``), in its own process group, its
output to files that are scanned for secrets. A stand-in until ``conformance/adapter.py``'s
``RunnerUnderTest`` is on main; it imports nothing from the runner."""
from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shlex
import signal
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]


class RunnerProcess:
    def __init__(self, config: dict[str, Any], directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.config_path = directory / "runner.json"
        self.config_path.write_text(json.dumps(config))
        os.chmod(self.config_path, 0o600)
        self.stdout_path, self.stderr_path = directory / "runner.stdout", directory / "runner.stderr"
        self.proc: asyncio.subprocess.Process | None = None

    def command(self) -> list[str]:
        custom = os.environ.get("RUNNER_UNDER_TEST_CMD")
        base = shlex.split(custom) if custom else [sys.executable, "-m", "runner_ref"]
        return [*base, "--config", str(self.config_path)]

    async def start(self) -> RunnerProcess:
        env = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "LC_ALL", "TMPDIR")}
        env["PYTHONPATH"] = os.environ.get("PYTHONPATH", str(REPO))
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
        out, err = os.open(self.stdout_path, flags, 0o600), os.open(self.stderr_path, flags, 0o600)
        try:
            self.proc = await asyncio.create_subprocess_exec(
                *self.command(), stdin=asyncio.subprocess.DEVNULL, stdout=out, stderr=err,
                env=env, cwd=str(REPO), start_new_session=True)
        finally:
            os.close(out)
            os.close(err)
        return self

    def output(self) -> bytes:
        return b"".join(p.read_bytes() for p in (self.stdout_path, self.stderr_path) if p.exists())

    async def stop(self) -> int | None:
        if self.proc is None:
            return None
        if self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                await asyncio.wait_for(self.proc.wait(), 15)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                await self.proc.wait()
        return self.proc.returncode
