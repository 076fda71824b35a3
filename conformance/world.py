"""``World``: one control plane, one scripted Hermes, one registered runner under test.

``async with open_world(runner_cmd="… {config}") as world:`` starts, in order,
1. a ``fake_server.ControlPlane`` (a ``ManualClock`` with ``manual_clock=True``) and a
   ``fixtures.ScriptedHermes`` (``hermes_auth="account"`` for a password account), both given one
   shared ``sequence`` counter when their constructors accept it, so a seq taken by a history
   exchange and one taken by a Hermes effect are comparable;
2. an admin session (:class:`~conformance.admin_client.AdminClient`) that registers the runner
   with explicit profiles;
3. the runner config the admin page would download, plus ``artifactRoots`` (a fresh directory)
   and ``hermesCredentials`` in account mode;
4. the :class:`~conformance.adapter.RunnerUnderTest` (started and awaited online unless
   ``start_runner=False``).
Leaving the block reaps the runner and removes every temp directory. Every secret minted on the
way (runner token and its sha256, admin password and CSRF token, Hermes session token or
password) is in :attr:`World.secrets`; :meth:`transcript` and :meth:`redact` never show them, and
:meth:`scan_for_secrets` reports where one leaked (runner output, wire exchanges, effects).
"""

from __future__ import annotations

import dataclasses
import hashlib
import inspect
import itertools
import json
import shutil
import signal
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from fake_server import ControlPlane, Exchange, ManualClock, Timings
from fixtures.hermes import ScriptedHermes

from .adapter import RunnerUnderTest
from .admin_client import AdminClient, Registered
from .scratch import make_dir
from .secrets import Leak, Secrets

ONLINE_TIMEOUT = 20.0
#: How many of the runner's last output lines a case's evidence keeps (all runs, stderr first).
OUTPUT_TAIL = 30


def _accepts(cls: type, name: str) -> bool:
    return name in inspect.signature(cls).parameters


def shared_sequence() -> Callable[[], int]:
    return itertools.count(1).__next__


class World:
    """See the module docstring. Attributes: ``cp``, ``hermes``, ``admin``, ``registered``,
    ``config``, ``runner`` (None without a command), ``sequence``, ``secrets``, ``artifact_root``."""

    def __init__(self, runner_cmd: str | None = None, *, profiles: Sequence[str] = ("default",),
                 hermes_script: Any = "slow", hermes_auth: str = "token",
                 manual_clock: bool = False, timings: Timings | None = None,
                 runner_name: str = "runner-under-test", config_extra: Mapping[str, Any] | None = None,
                 runner_env: Mapping[str, str] | None = None, runner_files: Sequence[str] = (),
                 start_runner: bool = True, online_timeout: float = ONLINE_TIMEOUT,
                 hermes: str = "scripted", seed: int | None = None) -> None:
        # ``hermes`` and ``seed`` are what the plugin's world fixture passes (casefixtures.py).
        self.hermes_mode = hermes
        self.seed = seed
        self.runner_cmd = runner_cmd
        self.profiles = list(profiles)
        self.hermes_script = hermes_script
        self.hermes_auth = hermes_auth
        self.clock = ManualClock() if manual_clock else None
        self.timings = timings or Timings(poll_hold=2.0, redelivery=1.0)
        self.runner_name = runner_name
        self.config_extra = dict(config_extra or {})
        self.runner_env = dict(runner_env or {})
        self.runner_files = list(runner_files)
        self.start_runner_on_enter = start_runner
        self.online_timeout = online_timeout
        self.sequence = shared_sequence()
        self.secrets = Secrets()
        self.cp: ControlPlane
        self.hermes: ScriptedHermes
        self.admin: AdminClient
        self.registered: Registered
        self.config: dict[str, Any] = {}
        self.runner: RunnerUnderTest | None = None
        self._work: Path | None = None
        self.artifact_root = Path()  # a fresh directory once entered
        self._open: list[Any] = []

    # -- lifecycle ---------------------------------------------------------------------------

    async def __aenter__(self) -> World:
        try:
            await self._start()
        except BaseException:
            await self.close()
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _start(self) -> None:
        self._work = make_dir("world")
        self.artifact_root = self._work / "artifacts"
        self.artifact_root.mkdir()
        seq = {"sequence": self.sequence}
        cp_kw: dict[str, Any] = {"timings": self.timings, "admin_profiles": self.profiles,
                                 "db_path": self._work / "control-plane.sqlite3",
                                 **(seq if _accepts(ControlPlane, "sequence") else {})}
        if self.clock is not None:
            cp_kw["clock"] = self.clock
        self.cp = ControlPlane(**cp_kw)
        await self.cp.start()
        self._open.append(self.cp)
        await self._start_hermes()
        self._collect_secrets()
        self.admin = AdminClient.for_control_plane(self.cp)
        await self.admin.__aenter__()
        self._open.append(self.admin)
        await self.admin.login()
        self.secrets.add("admin CSRF token", self.admin.csrf)
        self.registered = await self.admin.register(self.runner_name, profiles=self.profiles)
        token = self.registered.token
        self.secrets.add("runner token", token)
        self.secrets.add("runner token sha256", hashlib.sha256(token.encode()).hexdigest())
        extra = dict(self.config_extra)
        if self.hermes_auth == "account":
            extra.setdefault("hermesCredentials", {"username": self.hermes.username,
                                                   "password": self.hermes.password})
        self.config = self.admin.download_config(
            self.registered, hermes_url=self.hermes.url,
            artifact_roots=[str(self.artifact_root)], **extra)
        if self.runner_cmd is not None:
            self.runner = RunnerUnderTest(self.runner_cmd, self.config, secrets=self.secrets,
                                          env=self.runner_env, files=self.runner_files)
            if self.start_runner_on_enter:
                await self.start_runner()

    async def _start_hermes(self) -> None:
        """Start the Hermes side (the scripted Hermes; :mod:`conformance.real_world` overrides)."""
        seq = {"sequence": self.sequence} if _accepts(ScriptedHermes, "sequence") else {}
        h_kw: dict[str, Any] = {"auth": self.hermes_auth, "profiles": self.profiles, **seq}
        self.hermes = ScriptedHermes(self.hermes_script, **h_kw)
        await self.hermes.start()
        self._open.append(self.hermes)

    def _collect_secrets(self) -> None:
        self.secrets.add("admin password", self.cp.admin_password)
        self.secrets.add("Hermes session token", self.hermes.session_token)
        self.secrets.add("Hermes password", self.hermes.password)
        extra = getattr(self.hermes, "secrets", None)  # newer fixtures list every secret
        if isinstance(extra, Mapping):
            for name, value in extra.items():
                self.secrets.add(f"Hermes {name}", value if isinstance(value, str) else None)
        elif isinstance(extra, list | set | tuple | frozenset):
            for value in extra:
                self.secrets.add("Hermes secret", value if isinstance(value, str) else None)

    async def close(self) -> None:
        """Reap the runner, stop admin/Hermes/control plane, remove temp directories."""
        try:
            if self.runner is not None:
                await self.runner.close()
            for part in reversed(self._open):
                if isinstance(part, AdminClient):
                    await part.close()
                else:
                    await part.stop()
        finally:
            self._open.clear()
            if self._work is not None:
                shutil.rmtree(self._work, ignore_errors=True)
                self._work = None

    # -- the runner --------------------------------------------------------------------------

    @property
    def runner_id(self) -> str:
        return self.registered.runner_id

    def _require_runner(self) -> RunnerUnderTest:
        if self.runner is None:
            raise RuntimeError("this world has no runner command")
        return self.runner

    def clock_offset(self) -> float:
        """Seconds the control plane's clock is ahead of the wall clock (0 for a real clock)."""
        own = getattr(self.cp, "clock_offset", None)
        if callable(own):
            return float(own())
        return self.cp.clock.now() - time.time() if self.clock is not None else 0.0

    async def start_runner(self, *, wait_online: bool = True, follow_clock: bool = False) -> str | None:
        """Start the runner (under faketime at :meth:`clock_offset` with ``follow_clock``);
        the epoch once online (fails fast if it exits), or None without ``wait_online``."""
        runner = self._require_runner()
        await runner.start(faketime_offset=self.clock_offset() if follow_clock else None)
        if not wait_online:
            return None
        return await runner.wait_online(self.cp, self.runner_id, self.online_timeout)

    async def restart_runner(self, *, crash: bool = False, follow_clock: bool = False,
                             wait_online: bool = True) -> str | None:
        """Stop (SIGTERM, or SIGKILL with ``crash``) and start again on the same config and
        state; with ``wait_online``, the new epoch."""
        runner = self._require_runner()
        old = self.cp.epoch(self.runner_id)
        await runner.restart(sig=signal.SIGKILL if crash else signal.SIGTERM,
                             faketime_offset=self.clock_offset() if follow_clock else None)
        if not wait_online:
            return None
        return await runner.wait_online(self.cp, self.runner_id, self.online_timeout,
                                        other_than=old)

    # -- evidence ----------------------------------------------------------------------------

    def redact(self, text: str) -> str:
        return self.secrets.redact(text)

    def _raw_transcript(self) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        names = [f.name for f in dataclasses.fields(Exchange)]
        for ex in self.cp.history:
            # an exchange's fields are plain JSON values: no deep copy (``asdict``) is needed,
            # redact_data builds new containers anyway
            items.append({"type": "exchange", **{n: getattr(ex, n) for n in names}})
        for eff in self.hermes.effects.entries:
            items.append({"type": "effect", **eff.to_json()})
        items.sort(key=lambda d: (d.get("seq") or 0, d["type"]))
        return items

    def transcript(self) -> list[dict[str, Any]]:
        """History exchanges and Hermes effects ordered by ``seq``, every secret replaced by
        ``«redacted»`` (the runner's wire view of the test; safe to put into a report)."""
        return [self.secrets.redact_data(item) for item in self._raw_transcript()]

    def evidence(self) -> list[dict[str, Any]]:
        """What a case's result keeps (``results.json`` ``transcript``, schema ``$defs``):
        :meth:`transcript` plus the control plane's lifecycle facts (``type: lifecycle``), in one
        ``seq`` order, then the runner's last :data:`OUTPUT_TAIL` output lines (``type:
        output``, no ``seq``: a line is not stamped on the shared counter); all redacted."""
        facts = [{"type": "lifecycle", **dataclasses.asdict(f)}
                 for f in getattr(getattr(self.cp, "lifecycle", None), "entries", ())]
        items = self.transcript() + [self.secrets.redact_data(f) for f in facts]
        items.sort(key=lambda d: (d.get("seq") or 0, d["type"]))
        output: list[dict[str, Any]] = []
        for run, proc in enumerate(self.runner.runs if self.runner is not None else (), 1):
            for stream in ("stderr", "stdout"):
                output += [{"type": "output", "run": run, "stream": stream,
                            "text": self.secrets.redact(line)} for line in proc.lines(stream)]
        return items + output[-OUTPUT_TAIL:]

    def scan_for_secrets(self) -> list[Leak]:
        """Every place a known secret occurs: runner output (all runs), the wire exchanges and
        the Hermes effects."""
        found = self.runner.leaks() if self.runner is not None else []
        raw = self._raw_transcript()
        if not self.secrets.find(json.dumps(raw, default=str)):
            return found  # the common case: one dump of everything, nothing to attribute
        for item in raw:
            blob = json.dumps(item, default=str)
            where = f"{item['type']} #{item.get('seq')} ({item.get('route') or item.get('kind')})"
            found += self.secrets.leaks(blob, where)
        return found
