"""``RealWorld``: a :class:`~conformance.world.World` whose Hermes is a REAL Hermes Agent 0.19.0.

``open_world(cmd, hermes="real[:PATH]", model_script=SCRIPT, **options)`` builds one (the
``--hermes real`` of ``pytest``/``certify``). Rules of this module:
- The Hermes is found by :func:`resolve_hermes`: ``real`` looks where
  :func:`fixtures.real_hermes.find_hermes` looks (``$HERMES_AGENT_BIN``, ``$HERMES_AGENT_VENV``,
  ``.venv-hermes``); ``real:PATH`` names a ``hermes`` executable or a venv holding one. Any other
  hermes-agent version than 0.19.0 is refused. Not found → :class:`HermesUnavailable` with a
  one-line reason (certify exits 2 with it; pytest reports the cases not-applicable).
- Everything else is the scripted world's: the same control plane (one shared ``sequence``),
  admin registration, runner config and :class:`~conformance.adapter.RunnerUnderTest`. Only the
  Hermes side differs: a :class:`fixtures.real_hermes.ModelServer` playing ``model_script`` (a
  ``fixtures.real_hermes.Script``; the model's decisions are scripted, no model is measured)
  and :class:`fixtures.real_hermes.RealHermes` (``hermes dashboard`` on loopback port 0, a
  temporary ``HERMES_HOME`` with our ``yaoyao-bot-bridge`` plugin enabled), token mode only.
  That pair is started once per process and shared by its worlds (:mod:`conformance.real_host`:
  a Hermes' first turn alone takes many seconds); a world sets the model's script and counts
  only what happened since it started (model calls, plugin counters, log lines, output).
- A real Hermes has no effect log and no pause points: the evidence is the control plane's
  history, the model server's record of what it was asked (``world.model.calls``) and our
  plugin's own counters (``world.side().stats()``, straight from Hermes).
- Secrets: the Hermes session token joins :attr:`World.secrets`; what Hermes wrote to stdout,
  stderr and every ``*.log`` under its home while the world ran is scanned by
  :meth:`scan_for_secrets` with the runner's output and the wire exchanges.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from fake_server import Timings
from fixtures.real_hermes import HERMES_AGENT_VERSION, ModelServer, RealHermes, Script, find_hermes

from .real_host import host_for
from .secrets import Leak
from .world import World

#: Real Hermes answers in seconds, not milliseconds: no redelivery while a command is in flight.
REAL_TIMINGS = Timings(poll_hold=2.0, redelivery=5.0, watchdog_tick=0.5, offline_after=10.0)
PLUGIN_ROUTE = "/api/plugins/yaoyao-bot-bridge"
WS_LOG_LINE = re.compile(r"tui_gateway\.ws: ws (?P<what>accepted|closed) peer=(?P<peer>\S+)"
                         r"(?: reason=(?P<reason>\S+))?")


class HermesUnavailable(RuntimeError):
    """No usable hermes-agent 0.19.0 (the message is one line)."""


def _venv_version(exe: Path) -> str | None:
    for dist in exe.parent.parent.glob("lib/python*/site-packages/hermes_agent-*.dist-info"):
        return dist.name[len("hermes_agent-"):-len(".dist-info")]
    return None


def resolve_hermes(mode: str) -> tuple[Path | None, str]:
    """``(hermes executable, "")`` for ``real`` / ``real:PATH``, or ``(None, one-line reason)``."""
    if mode == "real":
        return find_hermes()
    if not mode.startswith("real:") or not mode[len("real:"):]:
        return None, f"--hermes must be scripted or real[:PATH], not {mode!r}"
    given = Path(mode[len("real:"):]).expanduser()
    exe = given / "bin" / "hermes" if given.is_dir() else given
    if not (exe.is_file() and os.access(exe, os.X_OK)):
        return None, f"hermes-agent not found at {given} (no hermes executable there)"
    version = _venv_version(exe)
    if version is not None and version != HERMES_AGENT_VERSION:
        return None, f"hermes-agent {version} found at {given}, {HERMES_AGENT_VERSION} needed"
    return exe, ""


class RealWorld(World):
    """A world on a real Hermes. Extra attributes: ``model`` (the ModelServer), ``hermes_bin``;
    ``hermes`` is the :class:`RealHermes` (``url``, ``session_token``, ``workdir``, ``home``)."""

    def __init__(self, runner_cmd: str | None = None, *, hermes: str = "real",
                 model_script: Script | None = None,
                 hermes_env: Mapping[str, str] | None = None, **options: Any) -> None:
        if options.get("hermes_auth", "token") != "token":
            raise ValueError("a real Hermes world runs in token mode only")
        options.setdefault("timings", REAL_TIMINGS)
        super().__init__(runner_cmd, **options)
        self.hermes_mode = hermes
        self.model_script = model_script if model_script is not None else Script(rules=())
        self.hermes_env = dict(hermes_env or {})
        self.model: ModelServer
        self.hermes_bin: Path | None = None
        self._model_calls0 = 0
        self._offsets: dict[str, int] = {}
        self._stats0: dict[str, Any] = {}

    async def _start_hermes(self) -> None:
        exe, reason = resolve_hermes(self.hermes_mode)
        if exe is None:
            raise HermesUnavailable(reason)
        self.hermes_bin = exe
        host = await host_for(exe, self.hermes_env)
        self.model = host.model
        self.model.script = self.model_script
        self.hermes = host.hermes  # type: ignore[assignment]  # World types it as the scripted one
        self._model_calls0 = len(self.model.calls)
        self._offsets = self._output_sizes()
        self._stats0 = await self._plugin_stats()

    def _logs(self) -> list[Path]:
        return sorted(self.hermes.home.rglob("*.log"))  # type: ignore[attr-defined]

    def _output_sizes(self) -> dict[str, int]:
        sizes = {"output": len(self.hermes.output())}  # type: ignore[attr-defined]
        sizes.update({str(log): log.stat().st_size for log in self._logs()})
        return sizes

    async def _plugin_stats(self) -> dict[str, Any]:
        from .acceptance.sides import RealSide

        return await RealSide(self.hermes, self.model).stats()

    def _collect_secrets(self) -> None:
        self.secrets.add("admin password", self.cp.admin_password)
        self.secrets.add("Hermes session token", self.hermes.session_token)

    def side(self) -> Any:
        """The acceptance scenario's view of this Hermes (counts at every hop), counting only
        what happened since this world started (the Hermes is shared by the process)."""
        from .acceptance.sides import RealSide

        stats0 = dict(self._stats0)

        class Since(RealSide):  # type: ignore[misc]
            async def stats(self) -> dict[str, Any]:
                now = await super().stats()
                return {k: v - stats0.get(k, 0) if isinstance(v, int) and not isinstance(v, bool)
                        else v for k, v in now.items()}

        return Since(self.hermes, self.model)

    def session_params(self) -> dict[str, Any]:
        """What ``session.create`` needs here: the sandbox ``cwd`` of this Hermes."""
        return {"cwd": str(self.hermes.workdir)}  # type: ignore[attr-defined]

    # -- evidence ----------------------------------------------------------------------------

    def _raw_transcript(self) -> list[dict[str, Any]]:
        import dataclasses

        items = [{"type": "exchange", **dataclasses.asdict(ex)} for ex in self.cp.history]
        model = getattr(self, "model", None)
        for call in (model.calls[self._model_calls0:] if model is not None else ()):
            items.append({"type": "model", "n": call.n, "rule": call.rule, "reply": call.reply,
                          "tool": call.tool, "stream": call.stream, "side": call.side})
        return items

    def hermes_sockets(self) -> dict[str, str | None]:
        """Every ``/api/ws`` socket Hermes accepted, by peer, with the reason it closed (None while
        open), from Hermes' own log (``tui_gateway.ws: ws accepted|closed peer=… reason=…``)."""
        real: RealHermes = self.hermes  # type: ignore[assignment]
        sockets: dict[str, str | None] = {}
        log = real.home / "logs" / "gui.log"
        data = log.read_bytes() if log.is_file() else b""
        text = data[self._offsets.get(str(log), 0):].decode(errors="replace")
        for m in WS_LOG_LINE.finditer(text):
            sockets[m["peer"]] = None if m["what"] == "accepted" else (m["reason"] or "closed")
        return sockets

    def hermes_output(self) -> bytes:
        """What Hermes wrote to stdout, stderr and its logs since this world started."""
        real = getattr(self, "hermes", None)
        if not isinstance(real, RealHermes) or not hasattr(self, "_offsets"):
            return b""
        out = real.output()[self._offsets["output"]:]
        for log in self._logs():
            out += log.read_bytes()[self._offsets.get(str(log), 0):]
        return out

    def scan_for_secrets(self) -> list[Leak]:
        found = super().scan_for_secrets()
        output = self.hermes_output()
        found += self.secrets.leaks(output, "Hermes output or logs")
        if b"Bearer " in output:  # a lease token the runner minted is unknown here: no header
            found.append(Leak("an Authorization: Bearer credential", "Hermes output or logs"))
        return found
