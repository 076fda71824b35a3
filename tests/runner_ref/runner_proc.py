"""Launch the reference runner as a subprocess (test helper): a thin layer over
``conformance.process.Process`` (own process group, scrubbed environment, stdin closed, output
read continuously and teed to ``runner-N.stdout``/``runner-N.stderr`` beside the config so every
byte can be scanned, line waits awaited, the whole group reaped)."""
from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

from conformance.process import LineTimeout, Process, ProcessExited, scrubbed_env

REPO = Path(__file__).resolve().parents[2]

FAST_ENV = {
    "RUNNER_REF_TEST_RECONNECT_DELAY": "0.1",
    "RUNNER_REF_TEST_INTERRUPT_WAIT": "1.0",
}


def write_config(directory: Path, cfg: dict[str, Any], mode: int = 0o600) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "runner.json"
    path.write_text(json.dumps(cfg))
    os.chmod(path, mode)
    return path


class RunnerProcess:
    """``python -m runner_ref --config PATH`` (``launcher`` and ``args`` may be changed before
    :meth:`start`); the whole process group is killed at :meth:`reap`."""

    def __init__(self, config_path: Path | None, *, args: list[str] | None = None,
                 env: dict[str, str] | None = None,
                 faketime_offset: float | None = None) -> None:
        self.config_path = config_path
        self.args = args if args is not None else ["--config", str(config_path)]
        self.env = scrubbed_env({**FAST_ENV, "PYTHONPATH": str(REPO), **(env or {})})
        self.faketime_offset = faketime_offset  # libfaketime preloaded (Process), no wrapper
        self.launcher = ["-m", "runner_ref"]
        base = (config_path.parent if config_path else Path(os.environ.get("TMPDIR", "/tmp")))
        n = 0
        while (base / f"runner-{n}.stderr").exists():
            n += 1
        self.stdout_path = base / f"runner-{n}.stdout"
        self.stderr_path = base / f"runner-{n}.stderr"
        self.stderr_path.touch(mode=0o600)  # reserve the name for this instance
        self._base, self._stem = base, f"runner-{n}"
        self.process: Process | None = None

    async def start(self) -> RunnerProcess:
        self.process = Process([sys.executable, *self.launcher, *self.args],
                               env=self.env, cwd=REPO, tee_dir=self._base, tee_stem=self._stem,
                               faketime_offset=self.faketime_offset)
        await self.process.start()
        return self

    def _require(self) -> Process:
        assert self.process is not None, "runner not started"
        return self.process

    @property
    def proc(self) -> asyncio.subprocess.Process | None:
        return self.process.proc if self.process is not None else None

    @property
    def pid(self) -> int:
        return self._require().pid

    def output(self) -> bytes:
        """Every byte written to the tee files (stdout then stderr)."""
        data = b""
        for p in (self.stdout_path, self.stderr_path):
            if p.exists():
                data += p.read_bytes()
        return data

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace") if self.stderr_path.exists() else ""

    async def wait_output(self, needle: str, timeout: float = 10.0, count: int = 1) -> None:
        """Until ``count`` stderr lines contain ``needle``; fails at once if the runner exits."""
        try:
            await self._require().wait_line(needle, timeout, count=count)
        except ProcessExited as exc:
            raise AssertionError(f"runner exited {exc.returncode}:\n{self.stderr()}") from None
        except LineTimeout:
            raise AssertionError(f"no {needle!r} in runner stderr:\n{self.stderr()}") from None

    async def wait(self, timeout: float = 10.0) -> int:
        return await self._require().wait(timeout)

    def signal(self, sig: int) -> None:
        self._require().signal(sig)

    async def reap(self) -> None:
        if self.process is not None:
            await self.process.reap()
