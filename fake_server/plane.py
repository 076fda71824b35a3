"""``ControlPlane``: the simulated control plane as an in-process harness API (the façade).

It owns the aiohttp server (127.0.0.1, port 0 by default), the SQLite store, the hub (epochs,
queue, channels, leases), the history, the lifecycle log, the clock and the fault controls.
The socket is bound BEFORE the app is built, so the Host allow-list knows its port; the
handlers receive narrow dependency records (``MachineDeps``, ``AdminDeps``), never the façade.
The harness verbs (commands, channels, leases) are in ``verbs``. See docs/harness-api.md.
"""

from __future__ import annotations

import asyncio
import itertools
import secrets
import shutil
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from aiohttp import web

from .admin import setup_admin
from .admin_deps import AdminDeps
from .artifacts import PublishedArtifact
from .clock import Clock, SystemClock
from .faults import Faults
from .handles import Channel, Lease
from .history import History
from .http_errors import JsonErrorListener
from .hub import Hub
from .hub_state import Slot, Waiter
from .lifecycle_log import LifecycleLog
from .machine_api import MachineDeps, setup_machine
from .ports import bind, bind_again
from .records import AccountRecord, RunnerRecord, SourceRecord
from .registration import Registration
from .store import Store
from .timings import Extras, Limits, Timings
from .verbs import CommandFailed, Verbs
from .waiting import scaled

__all__ = ["CommandFailed", "ControlPlane", "Registration"]


def allowed_hosts_for(host: str, port: int, configured: Sequence[str] | None) -> frozenset[str] | None:
    """Host headers the machine API accepts (gate 0, else 421 ``invalid_host``); None: any.

    By default the server's own address and its loopback spellings with the bound port
    (``127.0.0.1``, ``localhost``, ``[::1]``), or any Host when bound to a wildcard address;
    ``allowed_hosts=("*",)`` turns the check off."""
    if configured is not None:
        return None if "*" in configured else frozenset(h.lower() for h in configured)
    if host in ("0.0.0.0", "::", ""):  # listening on every address: any Host
        return None
    names = {host, "127.0.0.1", "localhost", "[::1]"}
    hosts = {f"{n}:{port}" for n in names}
    if port == 80:
        hosts |= names
    return frozenset(h.lower() for h in hosts)


class ControlPlane(Verbs):
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
        sequence: Callable[[], int] | None = None,
        extras: Extras | None = None,
    ) -> None:
        self._tmpdir: str | None = None
        if db_path is None:
            self._tmpdir = tempfile.mkdtemp(prefix="fake-server-")
            db_path = Path(self._tmpdir) / "control-plane.sqlite3"
        self.db_path = Path(db_path)
        self.timings = timings or Timings()
        self.limits = limits or Limits()
        self.extras = extras or Extras()
        self.clock: Clock = clock or SystemClock()
        self.admin_user = admin_user
        self.admin_password = admin_password or secrets.token_urlsafe(18)
        self.admin_profiles = tuple(admin_profiles)
        self.host = host
        self.port = port
        self.sequence: Callable[[], int] = sequence or itertools.count(1).__next__
        self.history = History(max_entries=history_max_entries, sequence=self.sequence)
        self.lifecycle = LifecycleLog(self.sequence)
        self._allowed_hosts = None if allowed_hosts is None else tuple(allowed_hosts)
        self.allowed_hosts: frozenset[str] | None = None  # set when the socket is bound
        self.faults = Faults()
        self.artifacts: list[tuple[str, PublishedArtifact]] = []
        self.restarts = 0
        self._followups: set[asyncio.Task[Any]] = set()
        self._store: Store | None = None
        self._hub: Hub | None = None
        self._runner: web.AppRunner | None = None
        self._listener: JsonErrorListener | None = None
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
        self._hub = Hub(self._store, self.clock, self.timings, self.limits, self.faults, self._published,
                        log=self.lifecycle, extras=self.extras)
        self._hub.start_watchdog()

    async def _serve(self, *, again: bool = False) -> None:
        # bind first: the app is built knowing its port
        sock = await bind_again(self.host, self.port) if again else bind(self.host, self.port)
        self.port = sock.getsockname()[1]
        self.allowed_hosts = allowed_hosts_for(self.host, self.port, self._allowed_hosts)
        hub, store = self.hub, self.store
        app = web.Application(client_max_size=self.limits.desktop_body + 1024)
        setup_machine(app, MachineDeps(hub, store, self.history, self.clock, self.faults, self.limits,
                                       self.allowed_hosts))
        setup_admin(app, AdminDeps(store, self.clock, self.url, hub.is_online, self.disable_runner,
                                   self.timings, self.history, hub.features))
        self.app = app
        runner = web.AppRunner(app, handler_cancellation=True)
        await runner.setup()
        listener = JsonErrorListener(runner, sock, access_log=None)
        try:
            await listener.start()
        except BaseException:
            sock.close()
            await runner.cleanup()
            raise
        self._runner, self._listener = runner, listener

    async def _close(self) -> None:
        if self._hub is not None:
            self._hub.close()
        if self._listener is not None:
            self._listener.close()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        if self._listener is not None:
            await self._listener.wait_closed()
            self._listener = None
        if self._store is not None:
            await self._store.close()
            self._store = None

    async def stop(self) -> None:
        await self._close()
        if self._tmpdir is not None:
            shutil.rmtree(self._tmpdir, ignore_errors=True)
            self._tmpdir = None

    async def restart(self) -> None:
        """Restart in process: new hub uuid (new epochs), retired instances forgotten, same port,
        registrations kept in SQLite. Queued commands end with 503 runner_offline."""
        assert self._hub is not None, "ControlPlane not started"
        await self._close()
        await self._open()
        self.restarts += 1
        await self._serve(again=True)

    def _published(self, runner_id: str, art: PublishedArtifact) -> None:
        self.artifacts.append((runner_id, art))

    # -- runners -------------------------------------------------------------------------------

    async def register_runner(
        self, name: str = "runner", source: str = "local", allowed_profiles: Sequence[str] = ("default",),
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

    async def _until(self, runner_id: str, cond: Callable[[Slot], Any], timeout: float) -> Any:
        """Await the first slot change after which ``cond(slot)`` is truthy; returns it."""
        async with asyncio.timeout(scaled(timeout)):
            while True:
                slot = self.hub.slot(runner_id)
                value = cond(slot)
                if value:
                    return value
                await slot.pulse.wait()

    async def wait_online(self, runner_id: str, timeout: float = 10.0) -> str:
        """Wait until the runner has an online state; returns its epoch."""
        epoch: str = await self._until(runner_id, lambda s: s.online and s.online.epoch, timeout)
        return epoch

    async def wait_epoch_change(self, runner_id: str, old: str | None, timeout: float = 10.0) -> str:
        """Wait until the runner is online with an epoch other than ``old``."""
        epoch: str = await self._until(
            runner_id, lambda s: s.online and s.online.epoch != old and s.online.epoch, timeout)
        return epoch

    def held_poll(self, runner_id: str) -> Waiter | None:
        """A token for the poll the hub holds for the runner now (None: none is held)."""
        s = self.hub.slots.get(runner_id)
        return s.waiter if s else None

    async def poll_held(self, runner_id: str, *, other_than: Waiter | None = None, timeout: float = 10.0) -> Waiter:
        """Wait until the hub holds a poll for the runner (one other than ``other_than``)."""
        held: Waiter = await self._until(
            runner_id, lambda s: s.waiter if s.waiter is not None and s.waiter is not other_than else None,
            timeout)
        return held

    async def poll_released(self, runner_id: str, timeout: float = 10.0) -> None:
        """Wait until no poll is held for the runner."""
        await self._until(runner_id, lambda s: s.waiter is None, timeout)

    def disconnects(self, runner_id: str) -> list[str]:
        """Reasons of every disconnect of the runner's online states by the current hub."""
        s = self.hub.slots.get(runner_id)
        return list(s.disconnects) if s else []

    def channels(self, runner_id: str) -> dict[str, Channel]:
        """The runner's registered (open) channels by connection id."""
        s = self.hub.slots.get(runner_id)
        return dict(s.channels) if s else {}

    def leases(self, runner_id: str) -> dict[str, Lease]:
        """The runner's active hub leases by lease id."""
        s = self.hub.slots.get(runner_id)
        return dict(s.leases) if s else {}

    def queued(self, runner_id: str) -> list[Any]:
        """The runner's commands that have not ended, in queue order."""
        s = self.hub.slots.get(runner_id)
        return list(s.queue.values()) if s else []

    def queued_bytes(self, runner_id: str) -> int:
        """Sum of the wire sizes of the runner's commands that have not ended."""
        s = self.hub.slots.get(runner_id)
        return s.queued_bytes if s else 0

    def features(self, runner_id: str) -> list[str]:
        """The live features of the runner's online state ([] offline; upstream scope)."""
        return self.hub.features(runner_id)

    async def force_watchdog(self, runner_id: str) -> None:
        """Expire the runner as the watchdog would (new epoch on its next poll)."""
        self.hub.disconnect(runner_id, "watchdog")

    async def disable_runner(self, runner_id: str) -> bool:
        """Admin disable: record kept with enabled=false, and hub.disconnect at once."""
        found = await self.store.disable_runner(runner_id)
        self._revoked(runner_id, "runner_disabled")
        self.hub.disconnect(runner_id, "disabled")
        return found

    async def set_runner_profiles(self, runner_id: str, profiles: Sequence[str]) -> None:
        await self.store.set_runner_profiles(runner_id, profiles)
        self._revoked(runner_id, "profiles", detail={"profiles": list(profiles)})

    async def get_runner(self, runner_id: str) -> RunnerRecord | None:
        return await self.store.get_runner(runner_id)

    def _revoked(self, runner_id: str, what: str, **kw: Any) -> None:
        detail = {"what": what, **kw.pop("detail", {})}
        self.lifecycle.record("revoked", runner_id, time=self.clock.now(), reason=what, detail=detail, **kw)

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
        self._revoked("", "profiles", detail={"account": name, "profiles": list(profiles)})

    async def set_account_active(self, name: str, active: bool) -> None:
        await self.store.set_account_active(name, active)
        if not active:
            self._revoked("", "account_active", detail={"account": name})

    async def bump_authorization(self, name: str) -> int:
        version = await self.store.bump_authorization(name)
        self._revoked("", "account_authorization", detail={"account": name, "version": version})
        return version

    async def add_source(
        self, source_id: str, name: str, *, paired: bool = False, allowed_profiles: Sequence[str] | None = None,
    ) -> SourceRecord:
        return await self.store.add_source(source_id, name, paired=paired, allowed_profiles=allowed_profiles)
