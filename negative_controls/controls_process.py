"""Negative controls of config and process (protocol 1 §1) and of limits and bad input."""
from __future__ import annotations

import asyncio
import contextlib
import json
import os
from typing import Any

from runner_ref import codes
from runner_ref.config import MSG_INSECURE, MSG_SATELLITE, MSG_UNREADABLE, ConfigError
from runner_ref.errors import CommandError

from .control import Control, const


def _ignore_mode(orig: Any) -> Any:
    from runner_ref.config import parse_config

    def load_config(path: str) -> Any:
        try:
            with open(path, encoding="utf-8") as f:   # the file mode is never looked at
                raw = json.load(f)
        except (OSError, ValueError):
            raise ConfigError(MSG_UNREADABLE) from None
        return parse_config(raw)
    return load_config


def _no_lock(orig: Any) -> Any:
    def acquire(self: Any) -> None:
        os.makedirs(self.path, mode=0o700, exist_ok=True)   # a directory, but no lock held
        os.chmod(self.path, 0o700)
    return acquire


def _no_signal_handlers(orig: Any) -> Any:
    def _install_signals(stop: asyncio.Event) -> None:
        from runner_ref.__main__ import _quiet_loop_errors
        asyncio.get_running_loop().set_exception_handler(_quiet_loop_errors)
    return _install_signals


def _without_rule(message: str) -> Any:
    return lambda orig: tuple(rule for rule in orig if rule[1] != message)


def _lenient_keys(orig: Any) -> Any:
    from runner_ref.config import TOP_KEYS

    def _schema_ok(raw: Any) -> bool:
        if isinstance(raw, dict):
            raw = {k: v for k, v in raw.items() if k in TOP_KEYS}   # unknown keys ignored
        return orig(raw)   # type: ignore[no-any-return]
    return _schema_ok


def _uncapped(orig: Any) -> Any:
    async def read_capped(resp: Any, cap: int) -> bytes:
        return await resp.read()   # type: ignore[no-any-return]  # the whole body, any size
    return read_capped


def _drops_unknown(orig: Any) -> Any:
    from runner_ref.poll_loop import EXTENSION_KINDS

    async def execute(self: Any, kind: Any, payload: Any, epoch: str) -> Any:
        if not (isinstance(kind, str) and kind in self.kinds) and kind not in EXTENSION_KINDS:
            raise asyncio.CancelledError   # dropped: no result is ever posted
        return await orig(self, kind, payload, epoch)
    return execute


def _exits_without_hermes(orig: Any) -> Any:
    async def _raw(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return await orig(self, *args, **kwargs)
        except CommandError as exc:
            if exc.code == codes.HERMES_UNAVAILABLE.code:
                raise SystemExit(1) from None   # "cannot work without Hermes"
            raise
    return _raw


def _coerced_ids(orig: Any) -> Any:
    async def open(self: Any, payload: dict[str, Any]) -> dict[str, Any]:
        cid = payload.get("connectionId")
        if cid is not None and not isinstance(cid, str):   # stringified, not refused
            payload = {**payload, "connectionId": str(cid)}
        return await orig(self, payload)   # type: ignore[no-any-return]
    return open


# -- graceful stop --------------------------------------------------------------------------
def _last_poll_at_stop(orig: Any) -> Any:
    async def _shutdown(self: Any) -> None:
        with contextlib.suppress(Exception):   # "one last poll to pick up what is pending"
            await asyncio.wait_for(self.machine.poll(False), 1.0)
        await orig(self)
    return _shutdown


def _drain_before_disconnect(orig: Any) -> Any:
    from runner_ref import timings

    async def _shutdown(self: Any) -> None:
        if self._tasks:   # drain in-flight work while still "connected": pending admits run
            await asyncio.wait(set(self._tasks), timeout=timings.SHUTDOWN_DRAIN)
        await orig(self)
    return _shutdown


CONTROLS: tuple[Control, ...] = (
    Control("accepts-world-readable-config", "config-process",
            "Never checks runner.json's file mode (0644 is accepted).",
            "credentials in a world-readable file (any local user reads the token)",
            "runner_ref.__main__:load_config", ("CFG-001",), _ignore_mode),
    Control("no-instance-lock", "config-process",
            "Takes no single-instance lock on the state directory.",
            "two processes on one ledger: duplicate execution, corrupted receipts",
            "runner_ref.statedir:StateDir.acquire", ("CFG-008",), _no_lock),
    Control("shared-state-dir", "config-process",
            "Keeps its state in <dir>/state/ for every runnerId.",
            "runners of one host sharing a ledger and a lock (stale receipts across runners)",
            "runner_ref.__main__:state_dir_for", ("CFG-009",),
            const(lambda config_path, runner_id: os.path.join(
                os.path.dirname(os.path.abspath(config_path)), "state"))),
    Control("localhost-hermes-allowed", "config-process",
            "Accepts hermesURL with the host 'localhost'.",
            "name resolution to a non-loopback address (localhost rebinding, /etc/hosts)",
            "runner_ref.config:HERMES_LOOPBACK_HOSTS", ("CFG-007",),
            const(frozenset({"127.0.0.1", "[::1]", "localhost"}))),
    Control("accepts-satellite", "config-process", "Accepts satellite: true at start-up.",
            "a retired mode still accepted from old configs",
            "runner_ref.config:URL_RULES", ("CFG-006",), _without_rule(MSG_SATELLITE)),
    Control("insecure-lan-without-optin", "config-process",
            "Accepts http to a non-loopback server without allowInsecureLan.",
            "cleartext credentials over a network nobody opted into",
            "runner_ref.config:URL_RULES", ("CFG-004",), _without_rule(MSG_INSECURE)),
    Control("accepts-unknown-keys", "config-process",
            "Ignores unknown keys in runner.json instead of refusing them.",
            "a typo'd security option silently ignored (lenient parsing)",
            "runner_ref.config:_schema_ok", ("CFG-002",), _lenient_keys),
    Control("relative-computers-path", "config-process",
            "Accepts relative paths in the computers block.",
            "paths resolved against whatever the working directory happens to be",
            "runner_ref.config:_abs_or_empty", ("CFG-005",),
            const(lambda v: isinstance(v, str))),
    Control("sigterm-exits-nonzero", "config-process",
            "Installs no SIGTERM handler: SIGTERM kills it without interrupts or a clean exit.",
            "a service killed mid-job on every deploy (systemd stop, container stop)",
            "runner_ref.__main__:_install_signals", ("CFG-001", "CFG-010"),
            _no_signal_handlers),
    Control("no-shutdown-drain", "config-process",
            "Cancels in-flight commands at SIGTERM instead of letting them post their results.",
            "a shutdown that abandons running jobs (results lost on every restart)",
            "runner_ref.timings:SHUTDOWN_DRAIN", ("CFG-011",), const(0.0)),
    Control("no-channel-cap", "limits", "Opens any number of gateway channels.",
            "unbounded resources: a misbehaving control plane exhausts Hermes' sockets",
            "runner_ref.timings:MAX_CHANNELS", ("LIM-001",), const(10**6)),
    Control("no-lease-cap", "limits", "Creates any number of team-tool leases.",
            "unbounded listeners, one port each",
            "runner_ref.teamtools.leases:MAX_LEASES", ("LIM-002",), const(10**6)),
    Control("no-hermes-body-cap", "limits", "Reads and relays Hermes bodies of any size.",
            "memory blow-up relaying a huge file (OOM-killed runner)",
            "runner_ref.hermes:read_capped", ("LIM-003",), _uncapped),
    Control("drops-unknown-kinds", "limits",
            "Silently drops a command of an unknown kind: no result is ever posted.",
            "a dispatcher that returns early, leaving the job pending forever",
            "runner_ref.poll_loop:PollLoop.execute", ("LIM-004", "WIR-008"), _drops_unknown),
    Control("exits-when-hermes-down", "limits",
            "Exits when the local Hermes is unreachable instead of failing the one command.",
            "a dependency outage taking the agent offline",
            "runner_ref.hermes:HermesClient._raw", ("LIM-009",), _exits_without_hermes),
    # Not "accepts any string": which strings a runner refuses is an implementation choice
    # (protocol.md 3.2); a connectionId that is not a string MUST be refused (LIM-006).
    Control("loose-connection-ids", "limits",
            "Coerces a connectionId that is not a string (12345 becomes \"12345\") and opens "
            "the channel.",
            "loose typing: an id stringified instead of validated (a JSON number taken for an id)",
            "runner_ref.gateway:Gateways.open", ("LIM-006",), _coerced_ids),
    Control("polls-after-stop", "config-process",
            "Sends one more poll during its graceful stop, after the signal.",
            "a shutdown path that keeps taking work (jobs picked up by a dying agent)",
            "runner_ref.poll_loop:PollLoop._shutdown", ("CFG-904",), _last_poll_at_stop),
    Control("runs-commands-admitted-at-stop", "config-process",
            "At a graceful stop, drains pending commands before it stops accepting work, so a "
            "command admitted during the stop is executed.",
            "a job started on a host that is shutting down, then abandoned mid-way",
            "runner_ref.poll_loop:PollLoop._shutdown", ("CFG-905",), _drain_before_disconnect),
)
