"""Handles the harness awaits: ``Command``, ``Channel``, ``Lease`` (asyncio only, no hub import).

Rules:
- A ``Command`` is awaitable (``await cmd`` → ``Outcome``); refused at enqueue it is born done
  (``Command.refused``). ``cmd.expire()`` ends it by its deadline now (504).
- A ``Channel`` records every event frame the runner sends; ``await ch.next_event(type)``.
  Its validity is asked of the hub through a callback given at construction.
- A ``Lease`` answers the runner's tool calls through harness handlers, by tool id (``"*"``).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable, Generator
from typing import Any

from .clock import TimerHandle
from .lifecycle import Event, Lifecycle, Outcome
from .tool_calls import LeaseCalls
from .waiting import scaled
from .wire import Wire

ToolHandler = Callable[[str, dict[str, Any]], Any]


class CommandRefused(Exception):
    """An enqueue refused before queueing; carries the caller's outcome and the reason."""

    def __init__(self, outcome: Outcome, reason: str | None = None) -> None:
        super().__init__(outcome.message)
        self.outcome = outcome
        self.reason = reason or outcome.message


class ToolError(Exception):
    """Raise from a tool handler to answer the runner's ``tool`` call with an error."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


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
        self.admit_reasons: list[str | None] = []
        self.refusal_reason: str | None = None
        self.deadline_timer: TimerHandle | None = None
        self.redeliver_timer: TimerHandle | None = None
        self.future: asyncio.Future[Outcome] = asyncio.get_running_loop().create_future()
        self._delivered = asyncio.Event()
        self._on_expire: Callable[[Command], None] | None = None

    @classmethod
    def refused(cls, runner_id: str, kind: str, payload: dict[str, Any], outcome: Outcome,
                expires_at_ms: int = 0, reason: str | None = None) -> Command:
        """A handle refused at enqueue: already done with ``outcome``."""
        cmd = cls(runner_id, kind, payload, expires_at_ms)
        cmd.lifecycle.apply(Event.CANCEL)
        cmd.refusal_reason = reason or outcome.message
        cmd.future.set_result(outcome)
        return cmd

    @property
    def deliveries(self) -> int:
        return self.lifecycle.deliveries

    @property
    def ended(self) -> bool:
        return self.lifecycle.ended

    @property
    def state(self) -> str:
        return self.lifecycle.state.value

    def done(self) -> bool:
        return self.future.done()

    @property
    def ended_offline(self) -> bool:
        """The control plane ended it on its own, the runner offline: refused at enqueue with
        no online state, or failed 503 ``runner_offline`` by a disconnect while queued. The
        runner never judged it (an outcome of the oracle, not of the runner)."""
        if self.refusal_reason == "runner offline":
            return True
        return bool(self.lifecycle.steps) and self.lifecycle.steps[-1].event is Event.OFFLINE

    @property
    def outcome(self) -> Outcome | None:
        return self.future.result() if self.future.done() else None

    def expire(self) -> None:
        """End the command by its deadline now (its caller gets 504 runner_command_uncertain)."""
        if self._on_expire is not None:
            self._on_expire(self)

    async def wait_delivered(self, timeout: float = 10.0) -> None:
        await asyncio.wait_for(self._delivered.wait(), scaled(timeout))

    async def wait(self, timeout: float | None = None) -> Outcome:
        return await asyncio.wait_for(asyncio.shield(self.future), scaled(timeout))

    def __await__(self) -> Generator[Any, None, Outcome]:
        return asyncio.shield(self.future).__await__()

    def __repr__(self) -> str:
        return f"Command({self.kind} {self.id} {self.lifecycle.state.value})"


class Channel:
    """A server-side channel (one ``gateway.open``), seen from the harness."""

    def __init__(
        self, runner_id: str, connection_id: str, account: str | None, auth_version: int,
        profile: str | None, cleanup_only: bool,
        validator: Callable[[Channel], Awaitable[str | None]] | None = None,
    ) -> None:
        self.runner_id = runner_id
        self.connection_id = connection_id
        self.account = account
        self.auth_version = auth_version
        self.profile = profile
        self.cleanup_only = cleanup_only
        self.events: list[dict[str, Any]] = []
        self.closed = asyncio.Event()
        self.closed_by: str | None = None
        self.revoked = False
        self.open_outcome: Outcome | None = None
        self.disconnects = 0  # how often the hub called the channel's disconnect
        self._validator = validator
        self._waiters: list[tuple[str | None, asyncio.Future[dict[str, Any]]]] = []

    @classmethod
    def refused(cls, runner_id: str, connection_id: str | None, account: str | None, auth_version: int,
                profile: str | None, cleanup_only: bool, outcome: Outcome) -> Channel:
        """A channel refused before registration: already closed, ``open_outcome`` set."""
        ch = cls(runner_id, connection_id or str(uuid.uuid4()), account, auth_version, profile, cleanup_only)
        ch.closed_by = "open_failed"
        ch.closed.set()
        ch.open_outcome = outcome
        return ch

    def push(self, frame: dict[str, Any]) -> None:
        self.events.append(frame)
        for want, fut in list(self._waiters):
            if not fut.done() and (want is None or frame.get("type") == want):
                fut.set_result(frame)
                self._waiters.remove((want, fut))

    _push = push

    async def next_event(self, type: str | None = None, timeout: float = 10.0, *, after: int = 0) -> dict[str, Any]:
        """The first event (of ``type``) at index ≥ ``after``, waiting up to ``timeout``."""
        for frame in self.events[after:]:
            if type is None or frame.get("type") == type:
                return frame
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._waiters.append((type, fut))
        try:
            return await asyncio.wait_for(fut, scaled(timeout))
        finally:
            if (type, fut) in self._waiters:
                self._waiters.remove((type, fut))

    async def refusal(self) -> str | None:
        """Why the channel is not valid now (None: valid)."""
        if self._validator is None:
            return "channel closed" if self.closed.is_set() else "channel not registered"
        return await self._validator(self)

    async def valid(self) -> bool:
        return await self.refusal() is None

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
