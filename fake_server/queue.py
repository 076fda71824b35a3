"""The hub's queue and long poll: enqueue (through ``validity.ENQUEUE_RULES``), deadlines,
batching and the held poll.

Rules:
- Enqueue refusals are ``validity.ENQUEUE_RULES``; a refusal is recorded (``enqueue_refused``
  with its reason) and raises ``CommandRefused``. The runner is online for enqueue while its
  online state exists (upstream queues until the watchdog drops the state).
- Deadlines: 30 s; ``lease.bind`` 70 s; the memory-extract path (exactly, as upstream's ``===``)
  120 s.
- A poll answers at once when it creates a state or something is due; otherwise it is held
  until a command is queued, a redelivery falls due, the hold passes, the client goes, or a
  newer poll arrives (which ends the older with an empty batch).
- A batch carries due commands in queue order up to ``Limits.poll_batch`` bytes, counting the
  envelope ``{"epoch":"<hub>:<state>","commands":[]}`` as 64 bytes plus the epoch's two uuids
  (generous); a command that does not fit is skipped, never split.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import codes
from .handles import Channel, Command, CommandRefused, Lease
from .hub_state import Online, Slot, Waiter
from .lifecycle import UNCERTAIN, Event, Outcome
from .validity import EnqueueFacts, command_profile, enqueue_refusal, is_stop

if TYPE_CHECKING:  # the mixin's host attributes (no import of hub: no circle)
    from .clock import Clock
    from .faults import Faults
    from .lifecycle import Step
    from .store import Store
    from .timings import Limits, Timings
    from .validity import ScopeFacts

EXTRACT_PATH = "/api/plugins/yaoyao-bot-bridge/memory-extract"


class QueueMixin:
    store: Store
    clock: Clock
    timings: Timings
    limits: Limits
    faults: Faults
    slots: dict[str, Slot]
    hub_id: str

    def slot(self, runner_id: str) -> Slot: raise NotImplementedError
    def fact(self, kind: str, runner_id: str, **kw: Any) -> None: raise NotImplementedError
    def _end(self, s: Slot, cmd: Command, event: Event, outcome: Outcome) -> Step: raise NotImplementedError
    async def channel_refusal(self, ch: Channel) -> str | None: raise NotImplementedError
    async def scope_facts(self, runner_id: str, account: str | None, version: int, profile: str | None,
                          *, check_profile: bool = True) -> ScopeFacts: raise NotImplementedError

    def default_deadline(self, kind: str, payload: dict[str, Any]) -> float:
        if kind == "lease.bind":
            return self.timings.bind_deadline
        if kind == "http" and payload.get("path") == EXTRACT_PATH:
            return self.timings.extract_deadline
        return self.timings.command_deadline

    async def enqueue(
        self, runner_id: str, kind: str, payload: dict[str, Any], *, account: str | None,
        deadline: float | None, profile: str | None = None, channel: Channel | None = None,
        lease: Lease | None = None, expires_at_ms: int | None = None, command_id: str | None = None,
    ) -> Command:
        """Queue a command; raises CommandRefused (with the rule's reason).

        ``command_id`` reuses an id (a replay); an id still queued is a harness error (ValueError)."""
        if profile is None:
            profile = command_profile(kind, payload)
        scope = await self.scope_facts(runner_id, account, 0, profile)
        record = await self.store.get_runner(runner_id)
        s = self.slot(runner_id)
        stop = is_stop(kind, payload)
        ch_refusal: str | None = None
        if kind == "gateway.rpc" and channel is not None:
            if channel.connection_id not in s.channels:
                ch_refusal = "channel closed"
            elif not stop:
                ch_refusal = await self.channel_refusal(channel)
        if deadline is None:
            deadline = self.default_deadline(kind, payload)
        now = self.clock.now()
        if command_id is not None and command_id in s.queue:
            raise ValueError(f"command {command_id} is still queued")
        when_ms = int((now + deadline) * 1000) if expires_at_ms is None else expires_at_ms
        cmd = Command(runner_id, kind, payload, when_ms, command_id)
        rule = enqueue_refusal(EnqueueFacts(
            account, scope.account_exists and scope.account_active, profile, scope.effective,
            s.online is not None and bool(record and record.enabled), ch_refusal,
            len(s.queue), self.limits.pending_commands, cmd.size, self.limits.single_command,
            s.queued_bytes, self.limits.queued_bytes,
        ))
        if rule is not None:
            self.fact("enqueue_refused", runner_id, command_id=cmd.id, reason=rule.reason,
                      connection_id=channel.connection_id if channel else None)
            raise CommandRefused(Outcome.failure(rule.status, rule.code, rule.message), rule.reason)
        cmd.account = account
        cmd.auth_version = scope.account_version
        cmd.profile = profile
        cmd.channel_id = channel.connection_id if channel else None
        cmd.lease_id = lease.lease_id if lease else None
        cmd.stop_method = stop
        cmd.check_result_validity = kind == "http" and account is not None
        cmd._on_expire = self.expire
        s.queue[cmd.id] = cmd
        s.queued_bytes += cmd.size
        cmd.deadline_timer = self.clock.call_at(now + deadline, lambda: self.expire(cmd))
        self.fact("queued", runner_id, command_id=cmd.id, connection_id=cmd.channel_id,
                  lease_id=cmd.lease_id, detail={"kind": kind, "account": account, "profile": profile})
        s.wake()
        return cmd

    def expire(self, cmd: Command) -> None:
        s = self.slots.get(cmd.runner_id)
        if s is not None:
            self._end(s, cmd, Event.EXPIRE, UNCERTAIN)

    def find(self, command_id: str) -> Command | None:
        for s in self.slots.values():
            if command_id in s.queue:
                return s.queue[command_id]
        return None

    def collect(self, s: Slot, exchange_seq: int | None = None) -> list[dict[str, Any]]:
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
            self.fact("delivered", s.runner_id, command_id=cmd.id, connection_id=cmd.channel_id,
                      lease_id=cmd.lease_id, detail={"exchange_seq": exchange_seq, "copies": copies})
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

    async def poll(self, runner_id: str, online: Online, created: bool,
                   exchange_seq: int | None = None) -> tuple[int, dict[str, Any]]:
        s = self.slot(runner_id)
        if s.waiter is not None:
            s.waiter.superseded = True
            s.waiter.wake()
            s.set_waiter(None)
        batch = self.collect(s, exchange_seq)
        if created or batch:
            return 200, {"epoch": online.epoch, "commands": batch}
        waiter = Waiter()
        s.set_waiter(waiter)
        hold = self.clock.call_at(self.clock.now() + self.timings.poll_hold, waiter.wake)
        try:
            await waiter.event.wait()
        finally:
            hold.cancel()
            if s.waiter is waiter:
                s.set_waiter(None)
        if s.online is not online:
            return codes.refusal(codes.RUNNER_INSTANCE_CHANGED)
        if waiter.superseded:
            return 200, {"epoch": online.epoch, "commands": []}
        return 200, {"epoch": online.epoch, "commands": self.collect(s, exchange_seq)}
