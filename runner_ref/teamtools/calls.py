"""Tool calls on a lease's loopback listener: validation, callId dedupe, result envelopes (§6).

Rules of this module:
- A call is ``{toolId: 1–100 chars, callId: 1–200 chars, arguments: object}``; anything else is
  400 ``invalid_tool_call`` (our code: upstream's is not determined).
- The fingerprint of a call is the canonical JSON (keys sorted recursively, no whitespace) of
  ``[toolId, arguments]``. Per lease, callIds are remembered for the lease's life:
  a new callId runs once; the same callId and fingerprint shares the first call's outcome, even
  while the first call is still running (and whether it succeeded or failed); the same callId with
  another fingerprint is 409 ``idempotency_conflict``; a 129th distinct callId is 429
  ``team_tool_call_limit``. Conflict and limit are checked before anything runs.
- Outcomes are MCP-style envelopes, always HTTP 200: a result that is an object with a ``content``
  array passes through unchanged; any other result becomes
  ``{content:[{type:"text", text:<JSON of it>}], structuredContent:<it>}``; a failure becomes
  ``{content:[{type:"text", text:<JSON {error, code}>}], isError:true}``.
"""
from __future__ import annotations

import asyncio
import enum
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from runner_ref.errors import CommandError, ServerError
from runner_ref.timings import ERROR_TEXT_CAP

MAX_CALLS = 128
MAX_TOOL_ID = 100
MAX_CALL_ID = 200


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False)


@dataclass(frozen=True)
class Call:
    tool_id: str
    call_id: str
    arguments: dict[str, Any]

    @property
    def fingerprint(self) -> str:
        return canonical_json([self.tool_id, self.arguments])


@dataclass(frozen=True)
class Outcome:
    """An HTTP answer of the listener: status and JSON body."""

    status: int
    body: dict[str, Any]


def error_outcome(status: int, code: str, message: str) -> Outcome:
    return Outcome(status, {"error": message, "code": code})


def _bounded_str(value: Any, limit: int) -> bool:
    return isinstance(value, str) and 1 <= len(value) <= limit


def parse_call(body: dict[str, Any]) -> Call | Outcome:
    tool_id, call_id, arguments = body.get("toolId"), body.get("callId"), body.get("arguments")
    if (not _bounded_str(tool_id, MAX_TOOL_ID) or not _bounded_str(call_id, MAX_CALL_ID)
            or not isinstance(arguments, dict)):
        return error_outcome(400, "invalid_tool_call",
                             "toolId (1-100), callId (1-200) and arguments (object) required")
    assert isinstance(tool_id, str) and isinstance(call_id, str)
    return Call(tool_id, call_id, arguments)


def wrap_result(value: Any) -> dict[str, Any]:
    if isinstance(value, dict) and isinstance(value.get("content"), list):
        return value
    return {"content": [{"type": "text", "text": json.dumps(value, ensure_ascii=False)}],
            "structuredContent": value}


def wrap_failure(code: str, message: str) -> dict[str, Any]:
    text = json.dumps({"error": message, "code": code}, ensure_ascii=False)
    return {"content": [{"type": "text", "text": text}], "isError": True}


def failure_of(exc: BaseException) -> dict[str, Any]:
    """The isError envelope of an exception; only coded errors carry their own text."""
    if isinstance(exc, (ServerError, CommandError)):
        return wrap_failure(exc.code, exc.message[:ERROR_TEXT_CAP])
    if isinstance(exc, asyncio.CancelledError):
        return wrap_failure("team_tools_expired", "team tool call stopped")
    return wrap_failure("runner_error", "team tool call failed")


class Decision(enum.Enum):
    NEW = "new"
    REPEAT = "repeat"
    CONFLICT = "conflict"
    LIMIT = "limit"


DECISION_REFUSALS: dict[Decision, Outcome] = {
    Decision.CONFLICT: error_outcome(409, "idempotency_conflict",
                                     "callId reused with different input"),
    Decision.LIMIT: error_outcome(429, "team_tool_call_limit", "too many team tool calls"),
}


def decide(seen: dict[str, str], call: Call, limit: int = MAX_CALLS) -> Decision:
    """Pure dedupe rule over ``seen`` (callId → fingerprint)."""
    known = seen.get(call.call_id)
    if known is None:
        return Decision.LIMIT if len(seen) >= limit else Decision.NEW
    return Decision.REPEAT if known == call.fingerprint else Decision.CONFLICT


class CallBook:
    """The callId memory of one lease; runs each new call once and shares its outcome."""

    def __init__(self, limit: int = MAX_CALLS) -> None:
        self.limit = limit
        self._seen: dict[str, str] = {}
        self._tasks: dict[str, asyncio.Task[dict[str, Any]]] = {}

    def __len__(self) -> int:
        return len(self._seen)

    async def run(self, call: Call, execute: Callable[[], Awaitable[Any]]) -> Outcome:
        decision = decide(self._seen, call, self.limit)
        if decision in DECISION_REFUSALS:
            return DECISION_REFUSALS[decision]
        if decision is Decision.NEW:
            self._seen[call.call_id] = call.fingerprint
            self._tasks[call.call_id] = asyncio.ensure_future(self._execute(execute))
        task = self._tasks[call.call_id]
        try:
            # Shield: a caller that goes away must not cancel the call others may share.
            return Outcome(200, await asyncio.shield(task))
        except asyncio.CancelledError as exc:
            if not task.cancelled():
                raise  # this caller was cancelled, not the call
            return Outcome(200, failure_of(exc))

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
