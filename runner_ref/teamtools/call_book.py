"""The callId memory of one lease (§6): runs each new call once, shares its outcome.

The rules (validation, dedupe decision, envelopes) are :mod:`runner_ref.teamtools.call_rules`;
this module only applies them with asyncio: a new callId starts one task, a repeat awaits the
same task (shielded, so a caller going away never cancels a call others share).
"""
from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from runner_ref import codes
from runner_ref.errors import CommandError, ServerError
from runner_ref.timings import ERROR_TEXT_CAP, MAX_CALLS

from .call_rules import (
    CALL_REFUSALS,
    Call,
    CallDecision,
    ListenerAnswer,
    decide,
    wrap_failure,
    wrap_result,
)


def failure_of(exc: BaseException) -> dict[str, Any]:
    """The isError envelope of an exception; only coded errors carry their own text."""
    if isinstance(exc, (ServerError, CommandError)):
        return wrap_failure(exc.code, exc.message[:ERROR_TEXT_CAP])
    if isinstance(exc, asyncio.CancelledError):
        return wrap_failure(codes.TOOL_CALL_STOPPED.code, codes.TOOL_CALL_STOPPED.message)
    return wrap_failure(codes.TOOL_CALL_FAILED.code, codes.TOOL_CALL_FAILED.message)


class CallBook:
    """The callId memory of one lease; runs each new call once and shares its outcome."""

    def __init__(self, limit: int = MAX_CALLS) -> None:
        self.limit = limit
        self._seen: dict[str, str] = {}
        self._tasks: dict[str, asyncio.Task[dict[str, Any]]] = {}
        self._waiting: dict[str, int] = {}          # callId → callers awaiting its outcome
        self._changed: asyncio.Event | None = None  # set (and replaced) when that changes

    def __len__(self) -> int:
        return len(self._seen)

    async def run(self, call: Call, execute: Callable[[], Awaitable[Any]]) -> ListenerAnswer:
        decision = decide(self._seen, call, self.limit)
        if decision in CALL_REFUSALS:
            return CALL_REFUSALS[decision]
        if decision is CallDecision.NEW:
            self._seen[call.call_id] = call.fingerprint
            self._tasks[call.call_id] = asyncio.ensure_future(self._execute(execute))
        task = self._tasks[call.call_id]
        self._count_waiting(call.call_id, +1)
        try:
            # Shield: a caller that goes away must not cancel the call others may share.
            return ListenerAnswer(200, await asyncio.shield(task))
        except asyncio.CancelledError as exc:
            if not task.cancelled():
                raise  # this caller was cancelled, not the call
            return ListenerAnswer(200, failure_of(exc))
        finally:
            self._count_waiting(call.call_id, -1)

    def waiting(self, call_id: str) -> int:
        """How many callers are awaiting the outcome of ``call_id`` right now."""
        return self._waiting.get(call_id, 0)

    async def until_waiting(self, call_id: str, n: int) -> None:
        """Return once at least ``n`` callers await ``call_id`` (an explicit "joined" signal)."""
        while self.waiting(call_id) < n:
            if self._changed is None:
                self._changed = asyncio.Event()
            await self._changed.wait()

    def _count_waiting(self, call_id: str, delta: int) -> None:
        left = self._waiting.get(call_id, 0) + delta
        if left:
            self._waiting[call_id] = left
        else:
            self._waiting.pop(call_id, None)
        changed, self._changed = self._changed, None
        if changed is not None:
            changed.set()

    @staticmethod
    async def _execute(execute: Callable[[], Awaitable[Any]]) -> dict[str, Any]:
        try:
            return wrap_result(await execute())
        except asyncio.CancelledError as exc:
            return failure_of(exc)
        except Exception as exc:  # every failure becomes an isError envelope, never a 500
            return failure_of(exc)

    async def cancel_all(self) -> None:
        """Stop calls still running (lease disposed); their waiters get an isError envelope."""
        running = [t for t in self._tasks.values() if not t.done()]
        for task in running:
            task.cancel()
        if running:
            await asyncio.gather(*running, return_exceptions=True)
