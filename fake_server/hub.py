"""The runner hub: online states and epochs, the command queue, long polls, channels, leases.

Rules:
- An online state belongs to one instance and carries the epoch ``<hub-uuid>:<state-uuid>``;
  a new state (new epoch) is made after a restart (new hub), a watchdog expiry, a disable, a
  reset poll and an instance replacement. All of those go through ``disconnect``, which wakes
  the held poll, closes every channel, drops every lease and ends every queued command with
  503 ``runner_offline``.
- Queue limits are checked at enqueue: 64 pending, 64 MiB queued, 36 MiB per command.
- At most 64 open channels and 64 active leases per runner: the 65th is refused at the caller
  with 429 ``runner_busy`` before anything is queued (the code is our choice, see the docs).
- A poll answers at once when it creates a state or something is due; otherwise it is held
  until a command is queued, a redelivery falls due, the hold passes, the client goes, or a
  newer poll arrives (which ends the older with an empty batch).
- Admit re-checks validity: command still queued and unexpired; runner enabled; account active
  with an unchanged authorization version; the command's profile still effective; its channel
  owned and valid (stop methods exempt) or its lease active.
Timers all go through the injectable clock.
"""

from __future__ import annotations

import asyncio
import base64
import json
import uuid
from collections.abc import Awaitable, Callable, Generator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs

from .artifacts import ArtifactUploads, PublishedArtifact
from .clock import Clock, TimerHandle
from .commands import (
    NOT_ADMITTED,
    OFFLINE,
    UNCERTAIN,
    Event,
    Lifecycle,
    Outcome,
    Wire,
    outcome_from_result,
)
from .faults import Faults
from .gates import Action, Ask, RunnerView, parse_features
from .store import AccountRecord, RunnerRecord, Store
from .timings import Limits, Timings
from .tool_calls import Decision as ToolDecision
from .tool_calls import LeaseCalls, parse_tool_body

STOP_METHODS = frozenset({"session.interrupt", "session.close", "session.active_list"})
CHANNEL_KINDS = frozenset({"gateway.open", "gateway.rpc"})
LEASE_KINDS = frozenset({"lease.create", "lease.bind"})
FILE_TRANSFER_MAX = 25 * 1024 * 1024

CHANNEL_LIMIT = Outcome.failure(429, "runner_busy", "too many channels for this runner")
LEASE_LIMIT = Outcome.failure(429, "runner_busy", "too many leases for this runner")

ToolHandler = Callable[[str, dict[str, Any]], Any]


class CommandRefused(Exception):
    """An enqueue refused before queueing; carries the caller's outcome."""

    def __init__(self, outcome: Outcome) -> None:
        super().__init__(outcome.message)
        self.outcome = outcome


@dataclass
class Online:
    instance: str
    epoch: str
    seen: float


class _Waiter:
    def __init__(self) -> None:
        self.event = asyncio.Event()
        self.superseded = False

    def wake(self) -> None:
        self.event.set()


class Command:
    """A queued command and the handle its caller awaits (``await handle`` → Outcome)."""

    def __init__(self, runner_id: str, kind: str, payload: dict[str, Any], expires_at_ms: int,
                 command_id: str | None = None) -> None:
        self.id = command_id or str(uuid.uuid4())
        self.runner_id = runner_id
        self.kind = kind
        self.payload = payload
        self.expires_at_ms = expires_at_ms
        self.wire: dict[str, Any] = Wire({
            "id": self.id, "kind": kind, "payload": payload, "expiresAt": expires_at_ms,
        })
        self.size = len(self.wire.json)  # serialised once, here
        self.lifecycle = Lifecycle()
        self.next_due = 0.0
        self.account: str | None = None
        self.auth_version = 0
        self.profile: str | None = None
        self.channel_id: str | None = None
        self.lease_id: str | None = None
        self.stop_method = False
        self.check_result_validity = False
        self.admits: list[bool] = []
        self.deadline_timer: TimerHandle | None = None
        self.redeliver_timer: TimerHandle | None = None
        self.future: asyncio.Future[Outcome] = asyncio.get_running_loop().create_future()
        self._delivered = asyncio.Event()

    @property
    def deliveries(self) -> int:
        return self.lifecycle.deliveries

    @property
    def ended(self) -> bool:
        return self.lifecycle.ended

    def done(self) -> bool:
        return self.future.done()

    @property
    def outcome(self) -> Outcome | None:
        return self.future.result() if self.future.done() else None

    async def wait_delivered(self, timeout: float = 10.0) -> None:
        await asyncio.wait_for(self._delivered.wait(), timeout)

    async def wait(self, timeout: float | None = None) -> Outcome:
        return await asyncio.wait_for(asyncio.shield(self.future), timeout)

    def __await__(self) -> Generator[Any, None, Outcome]:
        return asyncio.shield(self.future).__await__()

    def __repr__(self) -> str:
        return f"Command({self.kind} {self.id} {self.lifecycle.state.value})"


class Channel:
    """A server-side channel (one ``gateway.open``), seen from the harness."""

    def __init__(
        self, hub: Hub, runner_id: str, connection_id: str, account: AccountRecord | None,
        profile: str | None, cleanup_only: bool,
    ) -> None:
        self._hub = hub
        self.runner_id = runner_id
        self.connection_id = connection_id
        self.account = account.name if account else None
        self.auth_version = account.authorization_version if account else 0
        self.profile = profile
        self.cleanup_only = cleanup_only
        self.events: list[dict[str, Any]] = []
        self.closed = asyncio.Event()
        self.closed_by: str | None = None
        self.revoked = False
        self.open_outcome: Outcome | None = None
        self._waiters: list[tuple[str | None, asyncio.Future[dict[str, Any]]]] = []

    def _push(self, frame: dict[str, Any]) -> None:
        self.events.append(frame)
        for want, fut in list(self._waiters):
            if not fut.done() and (want is None or frame.get("type") == want):
                fut.set_result(frame)
                self._waiters.remove((want, fut))

    async def next_event(self, type: str | None = None, timeout: float = 10.0, *, after: int = 0) -> dict[str, Any]:
        """The first event (of ``type``) at index ≥ ``after``, waiting up to ``timeout``."""
        for frame in self.events[after:]:
            if type is None or frame.get("type") == type:
                return frame
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._waiters.append((type, fut))
        try:
            return await asyncio.wait_for(fut, timeout)
        finally:
            if (type, fut) in self._waiters:
                self._waiters.remove((type, fut))

    async def valid(self) -> bool:
        return await self._hub.channel_valid(self)

    def __repr__(self) -> str:
        return f"Channel({self.connection_id} closed={self.closed.is_set()})"


class Lease:
    """A hub lease: tool calls the runner relays for it are answered by harness handlers."""

    def __init__(
        self, runner_id: str, channel: Channel, profile: str, session: dict[str, Any],
        tools: list[dict[str, Any]], handlers: dict[str, ToolHandler], call_limit: int,
    ) -> None:
        self.lease_id = str(uuid.uuid4())
        self.runner_id = runner_id
        self.channel = channel
        self.profile = profile
        self.session = session
        self.tools = tools
        self.handlers = handlers
        self.active = True
        self.calls = LeaseCalls(limit=call_limit)
        self.create_outcome: Outcome | None = None

    @property
    def executions(self) -> int:
        """How many tool calls were actually executed (deduped calls not counted)."""
        return self.calls.total_executions


@dataclass
class Slot:
    """Everything the hub holds in memory for one runner."""

    runner_id: str
    online: Online | None = None
    retired: set[str] = field(default_factory=set)
    queue: dict[str, Command] = field(default_factory=dict)
    channels: dict[str, Channel] = field(default_factory=dict)
    leases: dict[str, Lease] = field(default_factory=dict)
    waiter: _Waiter | None = None
    uploads: ArtifactUploads = field(default_factory=ArtifactUploads)
    epochs: list[str] = field(default_factory=list)
    disconnects: list[str] = field(default_factory=list)
    online_changed: asyncio.Event = field(default_factory=asyncio.Event)
    queued_bytes: int = 0  # sum of ``size`` over ``queue``; kept by ``Hub`` on add and end

    def wake(self) -> None:
        if self.waiter is not None:
            self.waiter.wake()


class Hub:
    """One per control-plane process lifetime (a restart makes a new hub: new epochs)."""

    def __init__(
        self, store: Store, clock: Clock, timings: Timings, limits: Limits, faults: Faults,
        on_publish: Callable[[str, PublishedArtifact], None] | None = None,
    ) -> None:
        self.hub_id = str(uuid.uuid4())
        self.store = store
        self.clock = clock
        self.timings = timings
        self.limits = limits
        self.faults = faults
        self.slots: dict[str, Slot] = {}
        self._on_publish = on_publish
        self._watchdog: TimerHandle | None = None
        self.closed = False

    # -- slots and states ----------------------------------------------------------------------

    def slot(self, runner_id: str) -> Slot:
        s = self.slots.get(runner_id)
        if s is None:
            s = Slot(runner_id, uploads=ArtifactUploads(self.limits, self.timings.artifact_orphan_after))
            if self._on_publish is not None:
                cb = self._on_publish
                s.uploads.on_publish = lambda art: cb(runner_id, art)
            self.slots[runner_id] = s
        return s

    def is_online(self, runner_id: str) -> bool:
        s = self.slots.get(runner_id)
        if s is None or s.online is None:
            return False
        return self.clock.now() - s.online.seen < self.timings.offline_after

    def epoch(self, runner_id: str) -> str | None:
        s = self.slots.get(runner_id)
        return None if s is None or s.online is None else s.online.epoch

    def view(self, record: RunnerRecord | None, runner_id: str) -> RunnerView:
        s = self.slots.get(runner_id)
        return RunnerView(
            exists=record is not None,
            enabled=bool(record and record.enabled),
            token_hash=record.token_hash if record else "",
            online_instance=s.online.instance if s and s.online else None,
            online_epoch=s.online.epoch if s and s.online else None,
            retired=s.retired if s else frozenset(),  # the gates never mutate it
            retired_limit=self.limits.retired_instances,
        )

    async def apply(
        self, runner_id: str, ask: Ask, actions: list[Action], record: RunnerRecord | None = None
    ) -> tuple[Online | None, bool]:
        """Apply the gates' state changes; returns (online state, whether it was created)."""
        s = self.slot(runner_id)
        created = False
        for action in actions:
            if action is Action.RESET:
                self.disconnect(runner_id, "reset")
            elif action is Action.REPLACE:
                if s.online is not None:
                    s.retired.add(s.online.instance)
                self.disconnect(runner_id, "replaced")
            elif action is Action.ENSURE_ONLINE:
                if s.online is None:
                    assert ask.instance is not None
                    epoch = f"{self.hub_id}:{uuid.uuid4()}"
                    s.online = Online(ask.instance, epoch, self.clock.now())
                    s.epochs.append(epoch)
                    created = True
                    s.online_changed.set()
                    s.online_changed = asyncio.Event()
                s.online.seen = self.clock.now()
                features = parse_features(ask.features)
                if features is not None and (record is None or record.features != features):
                    await self.store.set_runner_features(runner_id, features)
        return s.online, created

    def disconnect(self, runner_id: str, reason: str) -> None:
        """hub.disconnect: wake the poll, drop the state, close channels and leases, fail the queue."""
        s = self.slots.get(runner_id)
        if s is None:
            return
        had_state = s.online is not None
        s.online = None
        if had_state:
            s.disconnects.append(reason)
            s.online_changed.set()
            s.online_changed = asyncio.Event()
        s.wake()
        for ch in list(s.channels.values()):
            self._close_channel(s, ch, "disconnect", fail_queue=False)
        for lease in list(s.leases.values()):
            lease.active = False
        s.leases.clear()
        for cmd in list(s.queue.values()):
            self._end(s, cmd, Event.OFFLINE, OFFLINE)
        s.uploads.drop_runner()

    def close(self) -> None:
        """hub.close(): every runner goes offline; timers stop."""
        self.closed = True
        if self._watchdog is not None:
            self._watchdog.cancel()
        for rid in list(self.slots):
            self.disconnect(rid, "close")

    # -- watchdog ------------------------------------------------------------------------------

    def start_watchdog(self) -> None:
        self._watchdog = self.clock.call_at(self.clock.now() + self.timings.watchdog_tick, self._tick)

    def _tick(self) -> None:
        if self.closed:
            return
        now = self.clock.now()
        for rid, s in list(self.slots.items()):
            if s.online is not None and now - s.online.seen >= self.timings.offline_after:
                self.disconnect(rid, "watchdog")
            s.uploads.sweep(now)
        self.start_watchdog()

    # -- the queue -----------------------------------------------------------------------------

    async def effective_profiles(self, runner_id: str, account: str | None) -> set[str] | None:
        """runner ∩ account ∩ source profiles (None: the runner is unknown)."""
        record = await self.store.get_runner(runner_id)
        if record is None:
            return None
        eff = set(record.allowed_profiles)
        if account is not None:
            acc = await self.store.get_account(account)
            if acc is None:
                return set()
            eff &= set(acc.allowed_profiles)
        source = await self.store.get_source(record.source_node_id)
        if source is not None and source.allowed_profiles is not None:
            eff &= set(source.allowed_profiles)
        return eff

    async def enqueue(
        self,
        runner_id: str,
        kind: str,
        payload: dict[str, Any],
        *,
        account: str | None,
        deadline: float | None,
        profile: str | None = None,
        channel: Channel | None = None,
        lease: Lease | None = None,
        expires_at_ms: int | None = None,
        command_id: str | None = None,
    ) -> Command:
        """Queue a command (checks profile, online, size, limits); raises CommandRefused.

        ``command_id`` reuses an id (a replay of a command a runner may have seen before);
        an id still queued for this runner is a harness error (ValueError)."""
        acc: AccountRecord | None = None
        if account is not None:
            acc = await self.store.get_account(account)
            if acc is None or not acc.active:
                raise CommandRefused(Outcome.failure(403, "runner_authorization_revoked", "account not authorized"))
        if profile is None:
            profile = command_profile(kind, payload)
        if profile is not None:
            eff = await self.effective_profiles(runner_id, account)
            if eff is None or profile not in eff:
                raise CommandRefused(Outcome.failure(403, "runner_profile_forbidden", "profile not allowed"))
        record = await self.store.get_runner(runner_id)
        s = self.slots.get(runner_id)
        if record is None or not record.enabled or s is None or s.online is None or not self.is_online(runner_id):
            raise CommandRefused(OFFLINE)
        stop = kind == "gateway.rpc" and payload.get("method") in STOP_METHODS
        if kind == "gateway.rpc" and channel is not None:
            if channel.connection_id not in s.channels or (not stop and not await self.channel_valid(channel)):
                raise CommandRefused(Outcome.failure(403, "runner_command_not_admitted", "channel not valid"))
        if deadline is None:
            deadline = self.default_deadline(kind, payload)
        now = self.clock.now()
        when_ms = int((now + deadline) * 1000)
        if command_id is not None and command_id in s.queue:
            raise ValueError(f"command {command_id} is still queued")
        cmd = Command(runner_id, kind, payload, when_ms if expires_at_ms is None else expires_at_ms,
                      command_id)
        if cmd.size > self.limits.single_command:
            raise CommandRefused(Outcome.failure(413, "runner_payload_limit", "command too large"))
        # the queue holds only commands that have not ended (``_end`` removes them)
        if len(s.queue) >= self.limits.pending_commands or s.queued_bytes + cmd.size > self.limits.queued_bytes:
            raise CommandRefused(Outcome.failure(429, "runner_busy", "runner busy"))
        cmd.account = acc.name if acc else None
        cmd.auth_version = acc.authorization_version if acc else 0
        cmd.profile = profile
        cmd.channel_id = channel.connection_id if channel else None
        cmd.lease_id = lease.lease_id if lease else None
        cmd.stop_method = stop
        cmd.check_result_validity = kind == "http" and account is not None
        s.queue[cmd.id] = cmd
        s.queued_bytes += cmd.size
        cmd.deadline_timer = self.clock.call_at(now + deadline, lambda: self.expire(cmd))
        s.wake()
        return cmd

    def default_deadline(self, kind: str, payload: dict[str, Any]) -> float:
        if kind == "lease.bind":
            return self.timings.bind_deadline
        if kind == "http" and str(payload.get("path", "")).startswith(
            "/api/plugins/yaoyao-bot-bridge/memory-extract"
        ):
            return self.timings.extract_deadline
        return self.timings.command_deadline

    def expire(self, cmd: Command) -> None:
        s = self.slots.get(cmd.runner_id)
        if s is not None:
            self._end(s, cmd, Event.EXPIRE, UNCERTAIN)

    def _end(self, s: Slot, cmd: Command, event: Event, outcome: Outcome) -> bool:
        if not cmd.lifecycle.apply(event):
            return False
        if s.queue.pop(cmd.id, None) is not None:
            s.queued_bytes -= cmd.size
        for t in (cmd.deadline_timer, cmd.redeliver_timer):
            if t is not None:
                t.cancel()
        if not cmd.future.done():
            cmd.future.set_result(outcome)
        return True

    def find(self, command_id: str) -> Command | None:
        for s in self.slots.values():
            if command_id in s.queue:
                return s.queue[command_id]
        return None

    # -- poll ----------------------------------------------------------------------------------

    def collect(self, s: Slot) -> list[dict[str, Any]]:
        """The due commands in queue order, within the batch limit; marks them delivered."""
        now = self.clock.now()
        out: list[dict[str, Any]] = []
        total = 64 + len(self.hub_id) * 2
        for cmd in list(s.queue.values()):
            if cmd.ended or (cmd.deliveries and cmd.next_due > now):
                continue
            copies = 1
            if self.faults.duplicates_batch > 0:
                self.faults.duplicates_batch -= 1
                copies = 2
            if total + (cmd.size + 1) * copies > self.limits.poll_batch:
                copies = 1
                if total + cmd.size + 1 > self.limits.poll_batch:
                    continue
            for _ in range(copies):
                out.append(cmd.wire)
                total += cmd.size + 1
            cmd.lifecycle.apply(Event.DELIVER)
            cmd._delivered.set()
            if cmd.redeliver_timer is not None:
                cmd.redeliver_timer.cancel()
            if self.faults.duplicates_next_poll > 0:
                self.faults.duplicates_next_poll -= 1
                cmd.next_due = now
            else:
                cmd.next_due = now + self.timings.redelivery
                cmd.redeliver_timer = self.clock.call_at(cmd.next_due, s.wake)
        return out

    async def poll(self, runner_id: str, online: Online, created: bool) -> tuple[int, dict[str, Any]]:
        s = self.slot(runner_id)
        if s.waiter is not None:
            s.waiter.superseded = True
            s.waiter.wake()
            s.waiter = None
        if created:
            return 200, {"epoch": online.epoch, "commands": self.collect(s)}
        batch = self.collect(s)
        if batch:
            return 200, {"epoch": online.epoch, "commands": batch}
        waiter = _Waiter()
        s.waiter = waiter
        hold = self.clock.call_at(self.clock.now() + self.timings.poll_hold, waiter.wake)
        try:
            await waiter.event.wait()
        finally:
            hold.cancel()
            if s.waiter is waiter:
                s.waiter = None
        if s.online is not online:
            return 409, _err("runner_instance_changed", "runner instance changed")
        if waiter.superseded:
            return 200, {"epoch": online.epoch, "commands": []}
        return 200, {"epoch": online.epoch, "commands": self.collect(s)}

    # -- admit / result ------------------------------------------------------------------------

    async def admit(self, runner_id: str, body: dict[str, Any]) -> bool:
        cid = body.get("id")
        s = self.slot(runner_id)
        cmd = s.queue.get(cid) if isinstance(cid, str) else None
        allowed = cmd is not None and await self.command_valid(cmd)
        if cmd is not None:
            cmd.admits.append(allowed)
        return allowed

    async def command_valid(self, cmd: Command) -> bool:
        if cmd.ended or self.clock.now_ms() >= cmd.expires_at_ms:
            return False
        s = self.slot(cmd.runner_id)
        record = await self.store.get_runner(cmd.runner_id)
        if record is None or not record.enabled:
            return False
        if cmd.kind in CHANNEL_KINDS:
            ch = s.channels.get(cmd.channel_id or "")
            if ch is None or ch.runner_id != cmd.runner_id:
                return False
            if cmd.stop_method:
                return True
            if not await self.channel_valid(ch):
                return False
        if cmd.kind in LEASE_KINDS:
            lease = s.leases.get(cmd.lease_id or "")
            if lease is None or not lease.active:
                return False
        return await self._scope_valid(cmd.runner_id, cmd.account, cmd.auth_version, cmd.profile)

    async def _scope_valid(self, runner_id: str, account: str | None, version: int, profile: str | None) -> bool:
        if account is not None:
            acc = await self.store.get_account(account)
            if acc is None or not acc.active or acc.authorization_version != version:
                return False
        if profile is not None:
            eff = await self.effective_profiles(runner_id, account)
            if eff is None or profile not in eff:
                return False
        return True

    async def result(self, runner_id: str, body: dict[str, Any]) -> None:
        s = self.slot(runner_id)
        cid = body.get("id")
        cmd = s.queue.get(cid) if isinstance(cid, str) else None
        if cmd is None or cmd.ended:
            return
        outcome = outcome_from_result(body, self.limits.result_error_text)
        if outcome.ok and cmd.check_result_validity:
            if not await self._scope_valid(runner_id, cmd.account, cmd.auth_version, cmd.profile):
                outcome = Outcome.failure(403, "runner_authorization_revoked", "authorization revoked")
            elif cmd.payload.get("path") == "/api/profiles":
                eff = await self.effective_profiles(runner_id, cmd.account) or set()
                outcome = Outcome.success(filter_profiles(outcome.result, eff))
        self._end(s, cmd, Event.RESULT, outcome)

    # -- channels ------------------------------------------------------------------------------

    def register_channel(
        self, runner_id: str, account: AccountRecord | None, profile: str | None,
        cleanup_only: bool, connection_id: str | None,
    ) -> Channel:
        """Register a server channel; a 65th open channel of a runner raises ``CommandRefused``
        (429 ``runner_busy``): upstream refuses it at the caller, the code is our choice."""
        s = self.slot(runner_id)
        if len(s.channels) >= self.limits.channels_per_runner:
            raise CommandRefused(CHANNEL_LIMIT)
        ch = Channel(self, runner_id, connection_id or str(uuid.uuid4()), account, profile, cleanup_only)
        s.channels[ch.connection_id] = ch
        return ch

    async def channel_valid(self, ch: Channel) -> bool:
        if ch.revoked or ch.closed.is_set():
            return False
        s = self.slots.get(ch.runner_id)
        if s is None or s.channels.get(ch.connection_id) is not ch:
            return False
        record = await self.store.get_runner(ch.runner_id)
        if record is None or not record.enabled:
            return False
        return await self._scope_valid(ch.runner_id, ch.account, ch.auth_version, ch.profile)

    def close_channel(self, ch: Channel, by: str) -> None:
        s = self.slots.get(ch.runner_id)
        if s is not None:
            self._close_channel(s, ch, by, fail_queue=True)

    def _close_channel(self, s: Slot, ch: Channel, by: str, *, fail_queue: bool) -> None:
        if s.channels.get(ch.connection_id) is ch:
            del s.channels[ch.connection_id]
        if ch.closed.is_set():
            return
        ch.closed_by = by
        ch.closed.set()
        for lid, lease in list(s.leases.items()):
            if lease.channel is ch:
                lease.active = False
                del s.leases[lid]
        s.uploads.drop_channel(ch.connection_id)
        if fail_queue:
            for cmd in list(s.queue.values()):
                if cmd.channel_id == ch.connection_id and cmd.kind != "gateway.close":
                    self._end(s, cmd, Event.CANCEL, NOT_ADMITTED)

    async def event(self, runner_id: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        s = self.slot(runner_id)
        cid = body.get("connectionId")
        ch = s.channels.get(cid) if isinstance(cid, str) else None
        gone = (410, _err("runner_connection_closed", "runner connection closed"))
        if ch is None:
            return gone
        if not await self.channel_valid(ch):
            self._close_channel(s, ch, "invalid", fail_queue=True)
            return gone
        if body.get("closed") is True:
            self._close_channel(s, ch, "runner", fail_queue=True)
            return 200, {"ok": True}
        frame = body.get("frame")
        if isinstance(frame, dict) and isinstance(frame.get("type"), str):
            ch._push(frame)
        return 200, {"ok": True}

    async def check(self, runner_id: str, body: dict[str, Any]) -> dict[str, Any]:
        s = self.slot(runner_id)
        cid = body.get("connectionId")
        ch = s.channels.get(cid) if isinstance(cid, str) else None
        allowed = ch is not None and await self.channel_valid(ch)
        return {"allowed": allowed, "fileTransferMaxBytes": FILE_TRANSFER_MAX}

    async def artifact(self, runner_id: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        s = self.slot(runner_id)
        cid = body.get("connectionId")
        ch = s.channels.get(cid) if isinstance(cid, str) else None
        ok = ch is not None and await self.channel_valid(ch)
        reply = s.uploads.handle(body, channel_ok=ok, now=self.clock.now())
        return reply.status, reply.body

    # -- leases and tools ----------------------------------------------------------------------

    def register_lease(
        self, ch: Channel, profile: str, session: dict[str, Any], tools: list[dict[str, Any]],
        handlers: dict[str, ToolHandler],
    ) -> Lease:
        """Register a hub lease; a 65th active lease of a runner raises ``CommandRefused``
        (429 ``runner_busy``), as for channels."""
        s = self.slot(ch.runner_id)
        if len(s.leases) >= self.limits.leases_per_runner:
            raise CommandRefused(LEASE_LIMIT)
        lease = Lease(ch.runner_id, ch, profile, session, tools, handlers, self.limits.tool_calls_per_lease)
        s.leases[lease.lease_id] = lease
        return lease

    def drop_lease(self, lease: Lease) -> None:
        lease.active = False
        s = self.slots.get(lease.runner_id)
        if s is not None and s.leases.get(lease.lease_id) is lease:
            del s.leases[lease.lease_id]

    async def tool(self, runner_id: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        req = parse_tool_body(body)
        if isinstance(req, ToolDecision):
            return req.status, req.body or _err("invalid_workspace_request", "invalid request")
        s = self.slot(runner_id)
        lease = s.leases.get(req.lease_id)
        expired = (410, _err("runner_lease_expired", "runner lease expired"))
        if lease is None or not lease.active:
            return expired
        if not await self.channel_valid(lease.channel):
            self.drop_lease(lease)
            return expired
        d = lease.calls.begin(req.call_id, req.tool_id, req.arguments)
        if d.action == "reject":
            return d.status, d.body or _err(d.code or "invalid_workspace_request", d.message or "")
        assert d.record is not None
        if d.action == "join":
            fut = d.record.attachment
            if isinstance(fut, asyncio.Future):
                result: tuple[int, dict[str, Any]] = await asyncio.shield(fut)
                return result
            return d.record.outcome  # type: ignore[no-any-return]
        # The execution is its own task: a runner that goes away mid-call cancels only its
        # wait, never the call, so later calls with the same callId still get its result.
        calls, call_id = lease.calls, req.call_id

        async def execute() -> tuple[int, dict[str, Any]]:
            answer = await run_tool(lease, req.tool_id, req.arguments)
            calls.finish(call_id, answer)
            return answer

        task = asyncio.ensure_future(execute())
        d.record.attachment = task
        return await asyncio.shield(task)


class ToolError(Exception):
    """Raise from a tool handler to answer the runner's ``tool`` call with an error."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


async def run_tool(lease: Lease, tool_id: str, arguments: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    handler = lease.handlers.get(tool_id) or lease.handlers.get("*")
    if handler is None:
        return 404, _err("team_tool_not_found", "tool not found")
    try:
        value = handler(tool_id, arguments)
        if isinstance(value, Awaitable):
            value = await value
    except ToolError as e:
        return e.status, _err(e.code, e.message)
    except Exception:  # a harness handler bug: answer, never crash
        return 502, _err("team_tool_failed", "tool failed")
    return 200, {"result": value}


def _err(code: str, message: str) -> dict[str, Any]:
    return {"error": message, "code": code}


def command_profile(kind: str, payload: dict[str, Any]) -> str | None:
    """The profile a command names (payload.profile, the http search, or rpc params.profile)."""
    p = payload.get("profile")
    if isinstance(p, str):
        return p
    if kind == "http":
        search = payload.get("search")
        if isinstance(search, str) and search:
            values = parse_qs(search.lstrip("?")).get("profile")
            if values:
                return values[0]
    if kind == "gateway.rpc":
        params = payload.get("params")
        if isinstance(params, dict) and isinstance(params.get("profile"), str):
            return str(params["profile"])
    return None


def filter_profiles(result: Any, allowed: set[str]) -> Any:
    """Filter a relayed ``/api/profiles`` answer (base64 JSON body) to ``allowed`` profiles."""
    if not isinstance(result, dict) or not isinstance(result.get("body"), str):
        return result
    try:
        data = json.loads(base64.b64decode(result["body"]))
    except (ValueError, TypeError):
        return result

    def keep(item: Any) -> bool:
        name = item if isinstance(item, str) else (
            item.get("name", item.get("id")) if isinstance(item, dict) else None
        )
        return name in allowed

    if isinstance(data, list):
        data = [i for i in data if keep(i)]
    elif isinstance(data, dict) and isinstance(data.get("profiles"), list):
        data = {**data, "profiles": [i for i in data["profiles"] if keep(i)]}
    else:
        return result
    body = base64.b64encode(json.dumps(data).encode()).decode()
    return {**result, "body": body}
