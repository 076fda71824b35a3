"""Run the simulated control plane as a separate process (restart = stop and start, same db).

``async with FakeServerProcess(db_path=..., admin_password=...) as proc: proc.url``;
``await proc.restart()`` keeps the registrations (same ``--db``) and asks for the same port.
The child runs in its own process group; only that group is signalled.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import tempfile
from pathlib import Path
from urllib.parse import urlsplit


class FakeServerProcess:
    def __init__(
        self,
        db_path: str | Path | None = None,
        *,
        admin_user: str = "admin",
        admin_password: str | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        poll_hold: float | None = None,
        redelivery: float | None = None,
        start_timeout: float = 20.0,
    ) -> None:
        self._tmp = tempfile.TemporaryDirectory(prefix="fake-server-proc-")
        self.db_path = Path(db_path) if db_path else Path(self._tmp.name) / "control-plane.sqlite3"
        self.admin_user = admin_user
        self.admin_password = admin_password
        self.host = host
        self.port = port
        self.poll_hold = poll_hold
        self.redelivery = redelivery
        self.start_timeout = start_timeout
        self.proc: asyncio.subprocess.Process | None = None
        self.url = ""
        self.returncodes: list[int] = []

    async def __aenter__(self) -> FakeServerProcess:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()
        self._tmp.cleanup()

    async def start(self) -> str:
        ready = Path(self._tmp.name) / "ready.json"
        ready.unlink(missing_ok=True)
        args = [sys.executable, "-m", "fake_server", "--host", self.host, "--port", str(self.port),
                "--ready-file", str(ready), "--db", str(self.db_path), "--admin-user", self.admin_user]
        if self.poll_hold is not None:
            args += ["--poll-hold", str(self.poll_hold)]
        if self.redelivery is not None:
            args += ["--redelivery", str(self.redelivery)]
        env = dict(os.environ)
        if self.admin_password is not None:
            env["FAKE_SERVER_ADMIN_PASSWORD"] = self.admin_password  # not on argv: ps shows argv
        self.proc = await asyncio.create_subprocess_exec(
            *args, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
        )
        assert self.proc.stdout is not None
        async with asyncio.timeout(self.start_timeout):
            line = await self.proc.stdout.readline()
        text = line.decode().strip()
        if not text.startswith("FAKE_SERVER_READY url="):
            err = b""
            if self.proc.stderr is not None:
                err = await self.proc.stderr.read()
            raise RuntimeError(f"fake server did not start: {text!r} {err.decode(errors='replace')[-500:]}")
        self.url = json.loads(ready.read_text())["url"]
        self.port = urlsplit(self.url).port or self.port
        return self.url

    async def stop(self, sig: int = signal.SIGTERM) -> int | None:
        proc, self.proc = self.proc, None
        if proc is None:
            return None
        if proc.returncode is None:
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                pass
            try:
                async with asyncio.timeout(10):
                    await proc.wait()
            except TimeoutError:
                os.killpg(proc.pid, signal.SIGKILL)
                await proc.wait()
        rc = proc.returncode
        assert rc is not None
        self.returncodes.append(rc)
        return rc

    async def restart(self, sig: int = signal.SIGTERM) -> str:
        """Stop (SIGTERM, or SIGKILL for a crash) and start again on the same db and port."""
        await self.stop(sig)
        return await self.start()
