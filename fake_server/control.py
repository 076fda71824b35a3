"""``ControlPlane``: the simulated control plane as an in-process harness API.

It owns the aiohttp server (127.0.0.1, port 0 by default), the SQLite store, the hub (epochs,
queue, channels, leases), the history, the clock and the fault controls. See docs/harness-api.md.
"""

from __future__ import annotations

import asyncio
import secrets
import shutil
import tempfile
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web

from .admin import setup_admin
from .admin_deps import AdminDeps
from .artifacts import PublishedArtifact
from .clock import Clock, SystemClock
from .commands import Event, Outcome
from .faults import Faults
from .history import History
from .http_errors import JsonErrorAppRunner
from .hub import (
    STOP_METHODS,
    Channel,
    Command,
    CommandRefused,
    Hub,
    Lease,
    ToolHandler,
    command_profile,
)
from .machine import setup_machine
from .store import AccountRecord, RunnerRecord, SourceRecord, Store
from .timings import Limits, Timings


def _open_payload(ch: Channel, extra: dict[str, Any]) -> dict[str, Any]:
    """The gateway.open payload: ``{connectionId[, cleanupOnly:true], **extra}``."""
    payload: dict[str, Any] = {"connectionId": ch.connection_id}
    if ch.cleanup_only:
        payload["cleanupOnly"] = True
    payload.update(extra)
    return payload


class CommandFailed(Exception):
    """A harness helper's command did not succeed; ``outcome`` says how."""

    def __init__(self, outcome: Outcome) -> None:
        super().__init__(f"{outcome.status} {outcome.code}: {outcome.message}")
        self.outcome = outcome


@dataclass(frozen=True)
class Registration:
    """A registered runner: its id and its token (the only place the token exists)."""

    runner_id: str
    token: str = field(repr=False)
    server_url: str
    record: RunnerRecord

    def runner_config(
        self,
        hermes_url: str = "http://127.0.0.1:9119",
        artifact_roots: Sequence[str] = (),
        allowed_profiles: Sequence[str] | None = None,
        **extra: Any,
    ) -> dict[str, Any]:
        """The runner.json of protocol 1 §1.1 for this runner (serverURL = the control plane)."""
        cfg: dict[str, Any] = {
            "protocol": 1,
            "serverURL": self.server_url,
            "runnerId": self.runner_id,
            "token": self.token,
            "hermesURL": hermes_url,
            "allowedProfiles": list(allowed_profiles or self.record.allowed_profiles),
            "artifactRoots": list(artifact_roots),
        }
        cfg.update(extra)
        return cfg


class ControlPlane:
    """Async context manager running the simulated control plane on a loopback port."""

    def __init__(
        self,
        db_path: str | Path | None = None,
        timings: Timings | None = None,
        clock: Clock | None = None,
        admin_user: str = "admin",
        admin_password: str | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        limits: Limits | None = None,
        admin_profiles: Sequence[str] = ("default",),
        history_max_entries: int | None = None,
        allowed_hosts: Sequence[str] | None = None,
    ) -> None:
        self._tmpdir: str | None = None
        if db_path is None:
            self._tmpdir = tempfile.mkdtemp(prefix="fake-server-")
            db_path = Path(self._tmpdir) / "control-plane.sqlite3"
        self.db_path = Path(db_path)
        self.timings = timings or Timings()
        self.limits = limits or Limits()
        self.clock: Clock = clock or SystemClock()
        self.admin_user = admin_user
        self.admin_password = admin_password or secrets.token_urlsafe(18)
        self.admin_profiles = tuple(admin_profiles)
        self.host = host
        self.port = port
        self.history = History(max_entries=history_max_entries)
        self._allowed_hosts = None if allowed_hosts is None else tuple(allowed_hosts)
        self._hosts_for_port: tuple[int, frozenset[str] | None] | None = None
        self.faults = Faults()
        self.faults._expire = self._expire_handle
        self.artifacts: list[tuple[str, PublishedArtifact]] = []
        self.restarts = 0
        self._store: Store | None = None
        self._hub: Hub | None = None
        self._runner: web.AppRunner | None = None
        self.app: web.Application | None = None

    # -- lifecycle -----------------------------------------------------------------------------

    @property
    def store(self) -> Store:
        assert self._store is not None, "ControlPlane not started"
        return self._store

    @property
    def hub(self) -> Hub:
        assert self._hub is not None, "ControlPlane not started"
        return self._hub

    @property
    def allowed_hosts(self) -> frozenset[str] | None:
        """Host headers the machine API accepts (gate 0, else 421 ``invalid_host``); None: any.

        By default the server's own address and its loopback spellings with the bound port
        (``127.0.0.1``, ``localhost``, ``[::1]``), or any Host when bound to a wildcard address;
        ``allowed_hosts=("*",)`` turns the check off."""
        if self._hosts_for_port is not None and self._hosts_for_port[0] == self.port:
            return self._hosts_for_port[1]
        allowed: frozenset[str] | None
        if self._allowed_hosts is not None:
            allowed = None if "*" in self._allowed_hosts else frozenset(h.lower() for h in self._allowed_hosts)
        elif self.host in ("0.0.0.0", "::", ""):  # listening on every address: any Host
            allowed = None
        else:
            names = {self.host, "127.0.0.1", "localhost", "[::1]"}
            hosts = {f"{n}:{self.port}" for n in names}
            if self.port == 80:
                hosts |= names
            allowed = frozenset(h.lower() for h in hosts)
        self._hosts_for_port = (self.port, allowed)
        return allowed

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    async def __aenter__(self) -> ControlPlane:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def start(self) -> None:
        await self._open()
        if await self.store.get_account(self.admin_user) is None:
            await self.store.create_account(
                self.admin_user, allowed_profiles=self.admin_profiles, is_admin=True,
                password=self.admin_password,
            )
        await self._serve()

    async def _open(self) -> None:
        """Open the store and start a new hub (new hub uuid: new epochs)."""
        self._store = await Store.open(self.db_path)
        self._hub = Hub(self._store, self.clock, self.timings, self.limits, self.faults, self._published)
        self._hub.start_watchdog()

    async def _serve(self) -> None:
        app = web.Application(client_max_size=self.limits.desktop_body + 1024)
        setup_machine(app, self)
        setup_admin(app, AdminDeps(
            store=self.store, clock=self.clock, own_origin=lambda: self.url,
            is_online=self.is_online, disable_runner=self.disable_runner, timings=self.timings,
        ))
        self.app = app
        runner = JsonErrorAppRunner(app, handler_cancellation=True, access_log=None)
        await runner.setup()
        last: OSError | None = None
        for _ in range(50):
            try:
                site = web.TCPSite(runner, self.host, self.port, reuse_address=True)
                await site.start()
                break
            except OSError as e:  # the old port may linger for a moment after a restart
                last = e
                await asyncio.sleep(0.05)
        else:
            await runner.cleanup()
            raise last or OSError("cannot bind")
        server = getattr(site, "_server", None)
        sockets = getattr(server, "sockets", None) or []
        if sockets:
            self.port = sockets[0].getsockname()[1]
        self._runner = runner

    async def stop(self) -> None:
        if self._hub is not None:
            self._hub.close()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        if self._store is not None:
            await self._store.close()
            self._store = None
        if self._tmpdir is not None:
            shutil.rmtree(self._tmpdir, ignore_errors=True)
            self._tmpdir = None

    async def restart(self) -> None:
        """Restart in process: new hub uuid (new epochs), retired instances forgotten, same port,
        registrations kept in SQLite. Queued commands end with 503 runner_offline."""
        assert self._hub is not None
        self._hub.close()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        if self._store is not None:
            await self._store.close()
        await self._open()
        self.restarts += 1
        await self._serve()

    def _published(self, runner_id: str, art: PublishedArtifact) -> None:
        self.artifacts.append((runner_id, art))

    # -- runners -------------------------------------------------------------------------------

    async def register_runner(
        self,
        name: str = "runner",
        source: str = "local",
        allowed_profiles: Sequence[str] = ("default",),
        owner: str | None = None,
    ) -> Registration:
        record, token = await self.store.create_runner(
            name=name, source_node_id=source, allowed_profiles=allowed_profiles,
            owner=owner or self.admin_user,
        )
        return Registration(record.id, token, self.url, record)

    def is_online(self, runner_id: str) -> bool:
        return self.hub.is_online(runner_id)

    def epoch(self, runner_id: str) -> str | None:
        return self.hub.epoch(runner_id)

    def epochs(self, runner_id: str) -> list[str]:
        """Every epoch issued to the runner by the current hub, in order."""
        s = self.hub.slots.get(runner_id)
        return list(s.epochs) if s else []

    async def wait_online(self, runner_id: str, timeout: float = 10.0) -> str:
        """Wait until the runner has an online state; returns its epoch."""
        async with asyncio.timeout(timeout):
            while True:
                slot = self.hub.slot(runner_id)
                if slot.online is not None:
                    return slot.online.epoch
                await slot.online_changed.wait()

    async def wait_epoch_change(self, runner_id: str, old: str | None, timeout: float = 10.0) -> str:
        """Wait until the runner is online with an epoch other than ``old``."""
        async with asyncio.timeout(timeout):
            while True:
                slot = self.hub.slot(runner_id)
                if slot.online is not None and slot.online.epoch != old:
                    return slot.online.epoch
                await slot.online_changed.wait()

    async def force_watchdog(self, runner_id: str) -> None:
        """Expire the runner as the watchdog would (new epoch on its next poll)."""
        self.hub.disconnect(runner_id, "watchdog")

    async def disable_runner(self, runner_id: str) -> bool:
        """Admin disable: record kept with enabled=false, and hub.disconnect at once."""
        found = await self.store.disable_runner(runner_id)
        self.hub.disconnect(runner_id, "disabled")
        return found

    async def set_runner_profiles(self, runner_id: str, profiles: Sequence[str]) -> None:
        await self.store.set_runner_profiles(runner_id, profiles)

    async def get_runner(self, runner_id: str) -> RunnerRecord | None:
        return await self.store.get_runner(runner_id)

    # -- accounts and sources -------------------------------------------------------------------

    async def create_account(
        self, name: str, allowed_profiles: Sequence[str] = ("default",), *,
        is_admin: bool = False, password: str | None = None,
    ) -> AccountRecord:
        return await self.store.create_account(
            name, allowed_profiles=allowed_profiles, is_admin=is_admin, password=password
        )

    async def set_account_profiles(self, name: str, profiles: Sequence[str]) -> None:
        await self.store.set_account_profiles(name, profiles)

    async def set_account_active(self, name: str, active: bool) -> None:
        await self.store.set_account_active(name, active)

    async def bump_authorization(self, name: str) -> int:
        return await self.store.bump_authorization(name)

    async def add_source(
        self, source_id: str, name: str, *, paired: bool = False,
        allowed_profiles: Sequence[str] | None = None,
    ) -> SourceRecord:
        return await self.store.add_source(source_id, name, paired=paired, allowed_profiles=allowed_profiles)

    # -- commands ------------------------------------------------------------------------------

    async def submit(
        self,
        runner_id: str,
        kind: str,
        payload: dict[str, Any],
        *,
        account: str | None = None,
        deadline: float | None = None,
        profile: str | None = None,
        expires_at_ms: int | None = None,
        channel: Channel | None = None,
        lease: Lease | None = None,
        command_id: str | None = None,
    ) -> Command:
        """Queue a command and return its handle at once (``await handle`` → Outcome).

        A refusal at enqueue (offline, profile, limits) gives a handle already done.
        ``command_id`` reuses an id instead of minting one (see :meth:`replay`)."""
        try:
            return await self.hub.enqueue(
                runner_id, kind, payload, account=account, deadline=deadline, profile=profile,
                channel=channel, lease=lease, expires_at_ms=expires_at_ms, command_id=command_id,
            )
        except CommandRefused as refused:
            return self._refused_handle(runner_id, kind, payload, refused.outcome, expires_at_ms or 0)

    async def replay(
        self,
        runner_id: str,
        wire: dict[str, Any],
        *,
        account: str | None = None,
        payload: dict[str, Any] | None = None,
        deadline: float | None = None,
    ) -> Command:
        """Queue again a command a runner was already given: same ``id``, ``kind`` and
        ``expiresAt`` (and payload, unless ``payload`` replaces it to provoke a fingerprint
        conflict). This is what a runner sees when a delivery is repeated across its own
        restart; the runner must answer it from its ledger, never run it twice."""
        return await self.submit(
            runner_id, wire["kind"], wire["payload"] if payload is None else payload,
            account=account, deadline=deadline, expires_at_ms=wire["expiresAt"],
            command_id=wire["id"],
        )

    async def command(
        self,
        runner_id: str,
        kind: str,
        payload: dict[str, Any],
        *,
        account: str | None = None,
        deadline: float | None = None,
        profile: str | None = None,
        expires_at_ms: int | None = None,
    ) -> Outcome:
        """Queue a command and await its outcome."""
        handle = await self.submit(
            runner_id, kind, payload, account=account, deadline=deadline, profile=profile,
            expires_at_ms=expires_at_ms,
        )
        return await handle

    def _expire_handle(self, handle: Command) -> None:
        self.hub.expire(handle)

    # -- channels ------------------------------------------------------------------------------

    async def open_channel(
        self,
        runner_id: str,
        account: str | None = None,
        profile: str | None = None,
        cleanup_only: bool = False,
        connection_id: str | None = None,
        *,
        deadline: float | None = None,
        check: bool = True,
        **extra: Any,
    ) -> Channel:
        """Send gateway.open and return the channel once the runner answered.

        With ``check`` (default) a failed open raises ``CommandFailed``; else the channel comes
        back closed with ``open_outcome`` set."""
        ch, handle = await self.submit_open_channel(
            runner_id, account, profile, cleanup_only, connection_id, deadline=deadline, **extra
        )
        outcome = await handle
        ch.open_outcome = outcome
        if not outcome.ok:
            self.hub.close_channel(ch, "open_failed")
            if check:
                raise CommandFailed(outcome)
        return ch

    async def submit_open_channel(
        self, runner_id: str, account: str | None = None, profile: str | None = None,
        cleanup_only: bool = False, connection_id: str | None = None, *,
        deadline: float | None = None, **extra: Any,
    ) -> tuple[Channel, Command]:
        """Register a channel and queue its gateway.open without waiting (for race tests)."""
        acc = await self.store.get_account(account) if account is not None else None
        try:
            ch = self.hub.register_channel(runner_id, acc, profile, cleanup_only, connection_id)
        except CommandRefused as refused:  # 64 channels already open: a done handle
            ch = self._refused_channel(runner_id, acc, profile, cleanup_only, connection_id, refused.outcome)
            payload = _open_payload(ch, extra)
            return ch, self._refused_handle(runner_id, "gateway.open", payload, refused.outcome)
        payload = _open_payload(ch, extra)
        handle = await self.submit(
            runner_id, "gateway.open", payload, account=account, deadline=deadline,
            profile=profile, channel=ch,
        )
        return ch, handle

    def _refused_channel(
        self, runner_id: str, acc: AccountRecord | None, profile: str | None, cleanup_only: bool,
        connection_id: str | None, outcome: Outcome,
    ) -> Channel:
        """A channel refused before registration: already closed, ``open_outcome`` set."""
        ch = Channel(self.hub, runner_id, connection_id or str(uuid.uuid4()), acc, profile, cleanup_only)
        ch.closed_by = "open_failed"
        ch.closed.set()
        ch.open_outcome = outcome
        return ch

    @staticmethod
    def _refused_handle(
        runner_id: str, kind: str, payload: dict[str, Any], outcome: Outcome, expires_at_ms: int = 0
    ) -> Command:
        """A handle refused at enqueue: already done with ``outcome``."""
        cmd = Command(runner_id, kind, payload, expires_at_ms)
        cmd.lifecycle.apply(Event.CANCEL)
        cmd.future.set_result(outcome)
        return cmd

    async def submit_rpc(
        self, ch: Channel, method: str, params: dict[str, Any] | None = None, *,
        deadline: float | None = None,
    ) -> Command:
        payload = {"connectionId": ch.connection_id, "method": method, "params": params or {}}
        stop = method in STOP_METHODS
        return await self.submit(
            ch.runner_id, "gateway.rpc", payload,
            account=None if stop else ch.account,
            deadline=deadline,
            profile=None if stop else command_profile("gateway.rpc", payload),
            channel=ch,
        )

    async def rpc(
        self, ch: Channel, method: str, params: dict[str, Any] | None = None, *,
        deadline: float | None = None,
    ) -> Outcome:
        """gateway.rpc on a channel; non-stop methods need the channel still valid."""
        return await (await self.submit_rpc(ch, method, params, deadline=deadline))

    async def close_channel(self, ch: Channel, *, deadline: float | None = None) -> Outcome:
        """Close server-side (its queued commands → 409 runner_command_not_admitted), then gateway.close."""
        self.hub.close_channel(ch, "harness")
        return await self.command(ch.runner_id, "gateway.close", {"connectionId": ch.connection_id}, deadline=deadline)

    def revoke_channel(self, ch: Channel) -> None:
        """Revoke the channel's authorization: admit refuses its non-stop commands, its next event
        is answered 410 and closes it, ``check`` says not allowed."""
        ch.revoked = True

    # -- leases --------------------------------------------------------------------------------

    async def create_lease(
        self,
        ch: Channel,
        *,
        profile: str,
        session: dict[str, Any],
        tools: Sequence[dict[str, Any]] = (),
        handlers: dict[str, ToolHandler] | None = None,
        work_id: str | None = None,
        deadline: float | None = None,
        check: bool = True,
        **extra: Any,
    ) -> Lease:
        """Register a hub lease and send lease.create; tool calls go to ``handlers`` by tool id
        (``"*"`` catches all)."""
        try:
            lease = self.hub.register_lease(ch, profile, dict(session), list(tools), dict(handlers or {}))
        except CommandRefused as refused:  # 64 leases already active
            if check:
                raise CommandFailed(refused.outcome) from None
            lease = Lease(ch.runner_id, ch, profile, dict(session), list(tools), dict(handlers or {}),
                          self.limits.tool_calls_per_lease)
            lease.active = False
            lease.create_outcome = refused.outcome
            return lease
        payload: dict[str, Any] = {
            "leaseId": lease.lease_id,
            "profile": profile,
            "workId": work_id or lease.lease_id,
            "session": dict(session),
            "catalog": list(tools),
            "workspaceMemory": False,
        }
        payload.update(extra)
        handle = await self.submit(
            ch.runner_id, "lease.create", payload, account=ch.account, deadline=deadline,
            profile=profile, channel=ch, lease=lease,
        )
        outcome = await handle
        lease.create_outcome = outcome
        if not outcome.ok:
            self.hub.drop_lease(lease)
            if check:
                raise CommandFailed(outcome)
        return lease

    async def bind_lease(
        self, lease: Lease, session: dict[str, Any] | None = None, *, deadline: float | None = None
    ) -> Outcome:
        payload = {"leaseId": lease.lease_id, "session": dict(session or lease.session)}
        return await self.command_for_lease(lease, "lease.bind", payload, deadline=deadline)

    async def command_for_lease(
        self, lease: Lease, kind: str, payload: dict[str, Any], *, deadline: float | None = None
    ) -> Outcome:
        handle = await self.submit(
            lease.runner_id, kind, payload, account=lease.channel.account, deadline=deadline,
            profile=lease.profile, channel=lease.channel, lease=lease,
        )
        return await handle

    async def close_lease(self, lease: Lease, *, deadline: float | None = None) -> Outcome:
        self.hub.drop_lease(lease)
        return await self.command(lease.runner_id, "lease.close", {"leaseId": lease.lease_id}, deadline=deadline)

    def revoke_lease(self, lease: Lease) -> None:
        """Drop the hub lease: tool calls → 410 runner_lease_expired, lease.bind not admitted."""
        self.hub.drop_lease(lease)
