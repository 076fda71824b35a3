"""Launch the reference runner as a subprocess in its own process group (test helper)."""
from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

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
    """``python -m runner_ref --config PATH``; stdout/stderr go to files so every byte can be
    scanned; the whole process group is killed at :meth:`reap`."""

    def __init__(self, config_path: Path | None, *, args: list[str] | None = None,
                 env: dict[str, str] | None = None, prefix: list[str] | None = None) -> None:
        self.config_path = config_path
        self.args = args if args is not None else ["--config", str(config_path)]
        self.env = {**os.environ, **FAST_ENV, "PYTHONPATH": str(REPO), **(env or {})}
        self.prefix = prefix or []
        self.launcher = ["-m", "runner_ref"]
        base = (config_path.parent if config_path else Path(os.environ.get("TMPDIR", "/tmp")))
        n = 0
        while (base / f"runner-{n}.stderr").exists():
            n += 1
        self.stdout_path = base / f"runner-{n}.stdout"
        self.stderr_path = base / f"runner-{n}.stderr"
        self.proc: asyncio.subprocess.Process | None = None

    async def start(self) -> RunnerProcess:
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
        out = os.open(self.stdout_path, flags, 0o600)
        err = os.open(self.stderr_path, flags, 0o600)
        self.proc = await asyncio.create_subprocess_exec(
            *self.prefix, sys.executable, *self.launcher, *self.args,
            stdout=out, stderr=err, stdin=asyncio.subprocess.DEVNULL, env=self.env,
            cwd=str(REPO), start_new_session=True)
        os.close(out)
        os.close(err)
        return self

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def output(self) -> bytes:
        data = b""
        for p in (self.stdout_path, self.stderr_path):
            if p.exists():
                data += p.read_bytes()
        return data

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace") if self.stderr_path.exists() else ""

    async def wait_output(self, needle: str, timeout: float = 10.0, count: int = 1) -> None:
        loop = asyncio.get_running_loop()
        end = loop.time() + timeout
        while self.stderr().count(needle) < count:
            if loop.time() > end:
                raise AssertionError(f"no {needle!r} in runner stderr:\n{self.stderr()}")
            if self.proc is not None and self.proc.returncode is not None:
                raise AssertionError(f"runner exited {self.proc.returncode}:\n{self.stderr()}")
            await asyncio.sleep(0.02)

    async def wait(self, timeout: float = 10.0) -> int:
        assert self.proc is not None
        return await asyncio.wait_for(self.proc.wait(), timeout)

    def signal(self, sig: int) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, sig)

    async def reap(self) -> None:
        if self.proc is None:
            return
        if self.proc.returncode is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            await asyncio.wait_for(self.proc.wait(), 5)
        except TimeoutError:
            pass
