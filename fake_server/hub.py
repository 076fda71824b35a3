"""The runner hub: gate actions, disconnect and watchdog, channels and leases, admit and result.

Rules:
- A new state (new epoch) is made after a restart (new hub), a watchdog expiry, a disable, a
  reset poll and an instance replacement. All of those go through ``disconnect``, which wakes
  the held poll, closes every channel, drops every lease and ends every queued command with
  503 ``runner_offline``.
- There is NO server-side cap on channels or leases (upstream has none): the 65th reaches the
  runner. ``Limits.channels_per_runner`` / ``leases_per_runner`` (None by default) opt in to a
  harness cap that refuses at the caller with 429 ``runner_busy``.
- The validity rules are ``validity``'s rows; the hub only fetches the records they read,
  applies the lifecycle table (``lifecycle``) and records every fact in the lifecycle log.
- ``event {closed: truthy}`` deletes the channel and calls its disconnect; its queued commands
  stay queued (their admit is refused "channel closed"). An event on an invalid channel closes
  it and ends its queued commands (409 ``runner_command_not_admitted``), as a server close does.
The queue and the long poll are in ``queue``; timers all go through the injectable clock.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from . import codes
from .artifacts import ArtifactUploads, PublishedArtifact
from .clock import Clock, TimerHandle
from .faults import Faults
from .gates import Action, Ask, RunnerView, parse_features
from .handles import Channel, Command, CommandRefused, Lease, ToolHandler
from .hub_state import Online, Slot
from .lifecycle import NOT_ADMITTED, OFFLINE, Event, Outcome, Step, outcome_from_result
from .lifecycle_log import LifecycleLog
from .queue import QueueMixin
from .records import RunnerRecord
from .relay import filter_profiles
from .store import Store
from .timings import Extras, Limits, Timings
from .validity import (
    SCOPE_RULES,
    AdmitFacts,
    ChannelFacts,
    ScopeFacts,
    admit_refusal,
    channel_refusal,
    effective_profiles,
    first_refusal,
)

FILE_TRANSFER_MAX = 25 * 1024 * 1024
_END_FACTS = {Event.RESULT: "result", Event.EXPIRE: "expired", Event.OFFLINE: "offline", Event.CANCEL: "cancelled"}


class Hub(QueueMixin):
    """One per control-plane process lifetime (a restart makes a new hub: new epochs)."""

    def __init__(
        self, store: Store, clock: Clock, timings: Timings, limits: Limits, faults: Faults,
        on_publish: Callable[[str, PublishedArtifact], None] | None = None,
        log: LifecycleLog | None = None, extras: Extras | None = None,
    ) -> None:
        self.hub_id = str(uuid.uuid4())
        self.store = store
        self.clock = clock
        self.timings = timings
        self.limits = limits
        self.faults = faults
        self.log = log if log is not None else LifecycleLog()
        self.extras = extras if extras is not None else Extras()
        self.slots: dict[str, Slot] = {}
        self._on_publish = on_publish
        self._watchdog: TimerHandle | None = None
        self.closed = False

    def fact(self, kind: str, runner_id: str, **kw: Any) -> None:
        self.log.record(kind, runner_id, time=self.clock.now(), **kw)

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

    def features(self, runner_id: str) -> list[str]:
        """The live features of the runner's online state ([] when offline)."""
        s = self.slots.get(runner_id)
        return list(s.online.features) if s is not None and s.online is not None else []

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
                    self.fact("instance_fenced", runner_id, detail={"instance": s.online.instance})
                self.disconnect(runner_id, "replaced")
            elif action is Action.ENSURE_ONLINE and ask.instance is not None:
                parsed = parse_features(ask.features)
                if s.online is None:
                    epoch = f"{self.hub_id}:{uuid.uuid4()}"
                    s.online = Online(ask.instance, epoch, self.clock.now(), tuple(parsed or ()))
                    s.epochs.append(epoch)
                    created = True
                    self.fact("epoch_changed", runner_id, detail={"epoch": epoch})
                    s.changed()
                elif parsed is not None:
                    s.online.features = tuple(parsed)
                s.online.seen = self.clock.now()
                live = s.online.features
                if record is not None and tuple(record.features) != live:
                    await self.store.set_runner_features(runner_id, live)
        return s.online, created

    def disconnect(self, runner_id: str, reason: str) -> None:
        """hub.disconnect: wake the poll, drop the state, close channels and leases, fail the queue."""
        s = self.slots.get(runner_id)
        if s is None:
            return
        old = s.online
        s.online = None
        if old is not None:
            s.disconnects.append(reason)
            self.fact("disconnected", runner_id, reason=reason, detail={"epoch": old.epoch})
            s.changed()
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

    def _end(self, s: Slot, cmd: Command, event: Event, outcome: Outcome) -> Step:
        step = cmd.lifecycle.apply(event)
        if not step.applied:
            return step
        if s.queue.pop(cmd.id, None) is not None:
            s.queued_bytes -= cmd.size
        for t in (cmd.deadline_timer, cmd.redeliver_timer):
            if t is not None:
                t.cancel()
        if not cmd.future.done():
            cmd.future.set_result(outcome)
        self.fact(_END_FACTS[event], cmd.runner_id, command_id=cmd.id, connection_id=cmd.channel_id,
                  lease_id=cmd.lease_id, reason=step.note or None,
                  detail={"status": outcome.status, "code": outcome.code})
        return step

    # -- validity facts (I/O: the records), the rules are validity's -----------------------------

    async def scope_facts(self, runner_id: str, account: str | None, version: int, profile: str | None,
                          *, check_profile: bool = True) -> ScopeFacts:
        record = await self.store.get_runner(runner_id)
        acc = await self.store.get_account(account) if account is not None else None
        source = await self.store.get_source(record.source_node_id) if record is not None else None
        eff = effective_profiles(
            record.allowed_profiles if record else None, acc.allowed_profiles if acc else None,
            source.allowed_profiles if source else None, account_named=account is not None,
        )
        return ScopeFacts(account, version, acc is not None, bool(acc and acc.active),
                          acc.authorization_version if acc else 0, profile, eff, check_profile)

    async def channel_refusal(self, ch: Channel) -> str | None:
        s = self.slots.get(ch.runner_id)
        record = await self.store.get_runner(ch.runner_id)
        return channel_refusal(ChannelFacts(
            ch.revoked, ch.closed.is_set(), s is not None and s.channels.get(ch.connection_id) is ch,
            bool(record and record.enabled),
            await self.scope_facts(ch.runner_id, ch.account, ch.auth_version, ch.profile),
        ))

    async def channel_valid(self, ch: Channel) -> bool:
        return await self.channel_refusal(ch) is None

    async def admit_reason(self, runner_id: str, cmd: Command | None) -> str | None:
        s = self.slot(runner_id)
        if cmd is None:
            return "unknown command"
        record = await self.store.get_runner(runner_id)
        ch = s.channels.get(cmd.channel_id or "")
        present = ch is not None and ch.runner_id == runner_id
        lease = s.leases.get(cmd.lease_id or "")
        return admit_refusal(AdmitFacts(
            True, cmd.ended, self.clock.now_ms(), cmd.expires_at_ms, bool(record and record.enabled),
            cmd.kind, cmd.stop_method, present,
            await self.channel_refusal(ch) if ch is not None and present else None,
            lease is not None and lease.active,
            await self.scope_facts(runner_id, cmd.account, cmd.auth_version, cmd.profile,
                                   check_profile=self.extras.admit_checks_profile),
        ))

    # -- admit / result ------------------------------------------------------------------------

    async def admit(self, runner_id: str, body: dict[str, Any]) -> bool:
        cid = body.get("id")
        cmd = self.slot(runner_id).queue.get(cid) if isinstance(cid, str) else None
        reason = await self.admit_reason(runner_id, cmd)
        if cmd is None:
            self.fact("admit_refused", runner_id, command_id=cid if isinstance(cid, str) else None,
                      reason=reason)
            return False
        cmd.admits.append(reason is None)
        cmd.admit_reasons.append(reason)
        step = cmd.lifecycle.apply(Event.ADMIT if reason is None else Event.ADMIT_REFUSED)
        self.fact("admitted" if reason is None else "admit_refused", runner_id, command_id=cmd.id,
                  connection_id=cmd.channel_id, lease_id=cmd.lease_id, reason=reason or step.note or None)
        return reason is None

    async def result(self, runner_id: str, body: dict[str, Any]) -> None:
        s = self.slot(runner_id)
        cid = body.get("id")
        cmd = s.queue.get(cid) if isinstance(cid, str) else None
        if cmd is None or cmd.ended:
            self.fact("ignored", runner_id, command_id=cid if isinstance(cid, str) else None,
                      reason="result for no queued command")
            return
        outcome = outcome_from_result(body, self.limits.result_error_text)
        if outcome.ok and cmd.check_result_validity:
            scope = await self.scope_facts(runner_id, cmd.account, cmd.auth_version, cmd.profile)
            if first_refusal(SCOPE_RULES, scope) is not None:
                outcome = Outcome.refusal(codes.RUNNER_AUTHORIZATION_REVOKED)
            elif cmd.payload.get("path") == "/api/profiles":
                outcome = Outcome.success(filter_profiles(outcome.result, set(scope.effective or ())))
        self._end(s, cmd, Event.RESULT, outcome)

    # -- channels ------------------------------------------------------------------------------

    def register_channel(
        self, runner_id: str, account: str | None, auth_version: int, profile: str | None,
        cleanup_only: bool, connection_id: str | None,
    ) -> Channel:
        """Register a server channel (opt-in cap: ``Limits.channels_per_runner``)."""
        s = self.slot(runner_id)
        cap = self.limits.channels_per_runner
        if cap is not None and len(s.channels) >= cap:
            raise CommandRefused(Outcome.refusal(codes.RUNNER_BUSY, "too many channels for this runner"),
                                 "channel cap (harness extra)")
        ch = Channel(runner_id, connection_id or str(uuid.uuid4()), account, auth_version, profile,
                     cleanup_only, self.channel_refusal)
        s.channels[ch.connection_id] = ch
        return ch

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
        ch.disconnects += 1
        self.fact("channel_closed", ch.runner_id, connection_id=ch.connection_id, reason=by)
        for lid, lease in list(s.leases.items()):
            if lease.channel is ch:
                lease.active = False
                del s.leases[lid]
        s.uploads.drop_channel(ch.connection_id)
        if fail_queue:
            for cmd in list(s.queue.values()):
                if cmd.channel_id == ch.connection_id and cmd.kind != "gateway.close":
                    self._end(s, cmd, Event.CANCEL, NOT_ADMITTED)

    def _channel(self, runner_id: str, body: dict[str, Any]) -> Channel | None:
        cid = body.get("connectionId")
        return self.slot(runner_id).channels.get(cid) if isinstance(cid, str) else None

    async def event(self, runner_id: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        s = self.slot(runner_id)
        ch = self._channel(runner_id, body)
        gone = codes.refusal(codes.RUNNER_CONNECTION_CLOSED)
        if ch is None:
            return gone
        if not await self.channel_valid(ch):
            self._close_channel(s, ch, "invalid", fail_queue=True)
            return gone
        if _truthy(body.get("closed")):
            self._close_channel(s, ch, "runner", fail_queue=False)
            return 200, {"ok": True}
        frame = body.get("frame")
        if isinstance(frame, dict) and isinstance(frame.get("type"), str):
            ch.push(frame)
        return 200, {"ok": True}

    async def check(self, runner_id: str, body: dict[str, Any]) -> dict[str, Any]:
        ch = self._channel(runner_id, body)
        allowed = ch is not None and await self.channel_valid(ch)
        return {"allowed": allowed, "fileTransferMaxBytes": FILE_TRANSFER_MAX}

    async def artifact(self, runner_id: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        ch = self._channel(runner_id, body)
        ok = ch is not None and await self.channel_valid(ch)
        reply = self.slot(runner_id).uploads.handle(body, channel_ok=ok, now=self.clock.now())
        return reply.status, reply.body

    # -- leases --------------------------------------------------------------------------------

    def register_lease(
        self, ch: Channel, profile: str, session: dict[str, Any], tools: list[dict[str, Any]],
        handlers: dict[str, ToolHandler],
    ) -> Lease:
        """Register a hub lease (opt-in cap: ``Limits.leases_per_runner``)."""
        s = self.slot(ch.runner_id)
        cap = self.limits.leases_per_runner
        if cap is not None and len(s.leases) >= cap:
            raise CommandRefused(Outcome.refusal(codes.RUNNER_BUSY, "too many leases for this runner"),
                                 "lease cap (harness extra)")
        lease = Lease(ch.runner_id, ch, profile, session, tools, handlers, self.limits.tool_calls_per_lease)
        s.leases[lease.lease_id] = lease
        return lease

    def drop_lease(self, lease: Lease) -> None:
        lease.active = False
        s = self.slots.get(lease.runner_id)
        if s is not None and s.leases.get(lease.lease_id) is lease:
            del s.leases[lease.lease_id]

    async def lease_active(self, lease: Lease) -> bool:
        """assertActive: the lease is registered and active and its channel valid (else dropped)."""
        s = self.slots.get(lease.runner_id)
        if not lease.active or s is None or s.leases.get(lease.lease_id) is not lease:
            return False
        if not await self.channel_valid(lease.channel):
            self.drop_lease(lease)
            return False
        return True


def _truthy(value: Any) -> bool:
    return value not in (None, False, 0, "") and value == value
