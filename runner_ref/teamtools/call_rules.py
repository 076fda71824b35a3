"""Tool calls on a lease's loopback listener, sans-IO: validation, the callId dedupe rule,
result envelopes (§6). :mod:`runner_ref.teamtools.call_book` runs calls by these rules.

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
The callId rules (dedupe by fingerprint, the 128-call limit, the id bounds) are also the control
plane's, and are written independently in fake_server on purpose (``fake_server/tool_calls.py``).
"""
from __future__ import annotations

import enum
import json
from dataclasses import dataclass
from typing import Any

from runner_ref import codes
from runner_ref.codes import Code, error_body, error_text
from runner_ref.js_text import js_length
from runner_ref.timings import MAX_CALL_ID, MAX_CALLS, MAX_TOOL_ID


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
class ListenerAnswer:
    """An HTTP answer of the listener: status and JSON body."""

    status: int
    body: dict[str, Any]


def error_answer(row: Code) -> ListenerAnswer:
    """The listener's answer for a row of :mod:`runner_ref.codes` (its status, its body)."""
    return ListenerAnswer(row.status, error_body(row))


def _bounded_str(value: Any, limit: int) -> bool:
    return isinstance(value, str) and 1 <= js_length(value) <= limit   # UTF-16 units, as JS


def parse_call(body: dict[str, Any]) -> Call | ListenerAnswer:
    tool_id, call_id, arguments = body.get("toolId"), body.get("callId"), body.get("arguments")
    if (not _bounded_str(tool_id, MAX_TOOL_ID) or not _bounded_str(call_id, MAX_CALL_ID)
            or not isinstance(arguments, dict)):
        return error_answer(codes.INVALID_TOOL_CALL)
    assert isinstance(tool_id, str) and isinstance(call_id, str)
    return Call(tool_id, call_id, arguments)


def wrap_result(value: Any) -> dict[str, Any]:
    if isinstance(value, dict) and isinstance(value.get("content"), list):
        return value
    return {"content": [{"type": "text", "text": json.dumps(value, ensure_ascii=False)}],
            "structuredContent": value}


def wrap_failure(code: str, message: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": error_text(code, message)}], "isError": True}


class CallDecision(enum.Enum):
    NEW = "new"
    REPEAT = "repeat"
    CONFLICT = "conflict"
    LIMIT = "limit"


CALL_REFUSALS: dict[CallDecision, ListenerAnswer] = {
    CallDecision.CONFLICT: error_answer(codes.CALL_CONFLICT),
    CallDecision.LIMIT: error_answer(codes.CALL_LIMIT),
}


def decide(seen: dict[str, str], call: Call, limit: int = MAX_CALLS) -> CallDecision:
    """Pure dedupe rule over ``seen`` (callId → fingerprint)."""
    known = seen.get(call.call_id)
    if known is None:
        return CallDecision.LIMIT if len(seen) >= limit else CallDecision.NEW
    return CallDecision.REPEAT if known == call.fingerprint else CallDecision.CONFLICT
