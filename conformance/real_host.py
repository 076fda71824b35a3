"""One real Hermes (and its scripted model server) per process, shared by the real worlds.

Rules of this module:
- A real Hermes takes seconds to start and its first agent turn many more (lazy imports), so a
  process starts one per ``(hermes executable, environment)`` and every ``RealWorld`` of the
  process uses it; each world still has its own control plane, runner and sessions.
- The host runs on an event loop of its own, in a daemon thread, because every case has its
  own event loop: worlds reach it through :func:`host_for` (awaited from the case's loop) and
  otherwise only over loopback sockets and plain attributes (``url``, ``session_token``,
  ``workdir``, ``home``, ``model.calls``).
- A world sets the model's script when it starts (``host.model.script = …``); worlds of one
  process run one after another (xdist workers are processes), so scripts never mix.
- A host whose Hermes exited is replaced on the next :func:`host_for`. At process exit
  (``atexit``) every host stops its Hermes (SIGTERM to its process group, then SIGKILL) and its
  model server, and removes its temporary directory.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import threading
from collections.abc import Coroutine, Mapping
from pathlib import Path
from typing import Any, TypeVar

from fixtures.real_hermes import ModelServer, RealHermes, Script

T = TypeVar("T")
STOP_TIMEOUT = 30.0


class HermesHost:
    """A started :class:`RealHermes` + :class:`ModelServer` on the host's own loop."""

    def __init__(self, exe: Path, env: Mapping[str, str]) -> None:
        self.exe, self.env = exe, dict(env)
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="real-hermes-host",
                                       daemon=True)
        self.thread.start()
        self.model: ModelServer
        self.hermes: RealHermes
        self.started = False

    async def call(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the host's loop; awaited from the caller's loop."""
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, self.loop))

    async def _start(self) -> None:
        self.model = ModelServer(Script(rules=()))
        await self.model.start()
        self.hermes = RealHermes(self.model.base_url, hermes_bin=self.exe, extra_env=self.env)
        await self.hermes.start()
        self.started = True

    async def start(self) -> None:
        try:
            await self.call(self._start())
        except BaseException:
            self.shutdown()
            raise

    def alive(self) -> bool:
        proc = getattr(self.hermes, "_proc", None) if self.started else None
        return proc is not None and proc.returncode is None

    async def _stop(self) -> None:
        if hasattr(self, "hermes"):
            await self.hermes.close()
        if hasattr(self, "model"):
            await self.model.close()

    def shutdown(self) -> None:
        """Stop Hermes and the model server, then the loop (from any thread but the host's)."""
        if self.loop.is_running():
            fut = asyncio.run_coroutine_threadsafe(self._stop(), self.loop)
            with contextlib.suppress(Exception):
                fut.result(STOP_TIMEOUT)
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(STOP_TIMEOUT)
        if not self.loop.is_running():
            self.loop.close()


_HOSTS: dict[tuple[str, tuple[tuple[str, str], ...]], HermesHost] = {}


async def host_for(exe: Path, env: Mapping[str, str] | None = None) -> HermesHost:
    """The process's host for this Hermes (started on first use, replaced if it died)."""
    key = (str(exe), tuple(sorted((env or {}).items())))
    host = _HOSTS.get(key)
    if host is not None and host.alive():
        return host
    if host is not None:
        _HOSTS.pop(key, None)
        host.shutdown()
    host = HermesHost(exe, env or {})
    await host.start()
    _HOSTS[key] = host
    return host


@atexit.register
def shutdown_all() -> None:
    while _HOSTS:
        _, host = _HOSTS.popitem()
        host.shutdown()
