"""Tool relay dedupe on the control plane (route ``tool``), as a sans-IO machine.

Rules of this module
--------------------
* Everything that decides a ``tool`` body *after* the lease has been found lives here: the
  strict body shape, the call fingerprint, callId dedupe and the per-lease call limit.
  Finding the hub lease (unknown → 410 ``runner_lease_expired``) and its ``assertActive`` are
  the caller's job, between ``parse_tool_body`` and ``LeaseCalls.begin``.
* No I/O and no asyncio: a repeated call is answered with ``action="join"``; the IO layer awaits
  the first call's completion (it may park an ``asyncio.Future`` in ``CallRecord.attachment``).
* The fingerprint replicates the upstream hub exactly: sha256 hex of JavaScript's
  ``JSON.stringify([toolId, arguments])`` over the UTF-8 bytes. Key order matters (unlike the
  runner's loopback listener, which sorts keys). ``js_json_stringify`` reproduces V8 byte for
  byte for JSON values: integer-like keys first in ascending order, then the others in the order
  received; no spaces; non-ASCII raw; only ``"``, ``\\``, control characters and lone
  surrogates escaped; numbers as ``Number.prototype.toString`` prints them.

Decision table for ``LeaseCalls.begin(call_id, tool_id, arguments)``::

    callId known, same fingerprint, first call running    → join   (200; await the first)
    callId known, same fingerprint, first call finished   → join   (done=True, outcome set)
    callId known, other fingerprint                       → reject 409 idempotency_conflict
    callId new, already `limit` (128) distinct callIds     → reject 429 runner_call_limit
    callId new                                            → run    (execute once, then finish)

Public API (used by the aiohttp ``tool`` handler)::

    req = parse_tool_body(body)            # ToolRequest | Decision(action="reject", 400, ...)
    calls = LeaseCalls(limit=128)          # one per hub lease
    d = calls.begin(req.call_id, req.tool_id, req.arguments)
    d.action in {"run", "join", "reject"}; d.status; d.code; d.message; d.body (error body)
    d.record: CallRecord | None  (call_id, fingerprint, done, outcome, attachment)
    calls.finish(call_id, outcome)         # store the outcome (any value, e.g. (status, body))
    calls.executions                       # Counter: call_id → times "run" was decided
    calls.total_executions
    js_json_stringify(value) -> str; fingerprint(tool_id, arguments) -> str
"""
from __future__ import annotations

import hashlib
import math
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Literal

from . import codes
from .codes import Code, error_body
from .gates import UUID_RE

#: Refusals of this module: name → (the code's row, message); the status is the row's.
ERRORS: dict[str, tuple[Code, str]] = {
    "shape": (codes.INVALID_WORKSPACE_REQUEST, "invalid request"),
    "conflict": (codes.IDEMPOTENCY_CONFLICT, "tool call id reused with different input"),
    "limit": (codes.RUNNER_CALL_LIMIT, "too many tool calls for this lease"),
}
CALL_LIMIT = 128


def js_length(s: str) -> int:
    """String length as JavaScript counts it (UTF-16 code units)."""
    return len(s.encode("utf-16-le", "surrogatepass")) // 2


# -- JSON.stringify -------------------------------------------------------------------------

_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r",
            "\t": "\\t"}


def _js_string(s: str) -> str:
    """JSON.stringify of a string (ES2019 well-formed: lone surrogates as \\udxxx)."""
    out = ['"']
    i, n = 0, len(s)
    while i < n:
        ch = s[i]
        cp = ord(ch)
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif cp < 0x20:
            out.append(f"\\u{cp:04x}")
        elif 0xD800 <= cp <= 0xDBFF:
            if i + 1 < n and 0xDC00 <= ord(s[i + 1]) <= 0xDFFF:
                low = ord(s[i + 1])
                out.append(chr(0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00)))
                i += 1
            else:
                out.append(f"\\u{cp:04x}")
        elif 0xDC00 <= cp <= 0xDFFF:
            out.append(f"\\u{cp:04x}")
        else:
            out.append(ch)
        i += 1
    out.append('"')
    return "".join(out)


def js_number(value: int | float) -> str:
    """``Number.prototype.toString()`` of a JSON number as JavaScript would hold it."""
    try:
        x = float(value)
    except OverflowError:
        return "null"  # the integer is beyond double range: Infinity in JS
    if not math.isfinite(x):
        return "null"  # JSON.stringify(Infinity / NaN) === "null"
    if x == 0:
        return "0"  # also -0
    sign = "-" if x < 0 else ""
    # repr gives the shortest round-tripping digits, as ECMAScript Number::toString requires.
    _, digit_tuple, exp = Decimal(repr(abs(x))).as_tuple()
    digits = "".join(map(str, digit_tuple)).rstrip("0")
    assert isinstance(exp, int)
    exp += len("".join(map(str, digit_tuple))) - len(digits)
    k = len(digits)
    n = k + exp  # value = 0.digits × 10^n
    if k <= n <= 21:
        body = digits + "0" * (n - k)
    elif 0 < n <= 21:
        body = digits[:n] + "." + digits[n:]
    elif -6 < n <= 0:
        body = "0." + "0" * (-n) + digits
    else:
        e = n - 1
        mant = digits if k == 1 else digits[0] + "." + digits[1:]
        body = f"{mant}e{'+' if e >= 0 else '-'}{abs(e)}"
    return sign + body


_ARRAY_INDEX_MAX = 2**32 - 2


def _is_array_index(key: str) -> bool:
    return key.isdigit() and key.isascii() and (key == "0" or key[0] != "0") and int(
        key) <= _ARRAY_INDEX_MAX


def js_key_order(obj: dict[str, Any]) -> list[str]:
    """Own-property order of a JS object built by JSON.parse: array indices ascending first."""
    index_keys = sorted((k for k in obj if _is_array_index(k)), key=int)
    return index_keys + [k for k in obj if not _is_array_index(k)]


def js_json_stringify(value: Any) -> str:
    """``JSON.stringify(value)`` for a JSON value (dict/list/str/int/float/bool/None).

    Iterative, so any nesting depth works. Raises ``TypeError`` for non-JSON types.
    """
    out: list[str] = []
    stack: list[Iterator[Any]] = []

    def emit(v: Any) -> Iterator[Any] | None:
        if v is None:
            out.append("null")
        elif v is True:
            out.append("true")
        elif v is False:
            out.append("false")
        elif isinstance(v, str):
            out.append(_js_string(v))
        elif isinstance(v, int | float):
            out.append(js_number(v))
        elif isinstance(v, dict):
            for k in v:
                if not isinstance(k, str):
                    raise TypeError("object keys must be strings")
            return _object_parts(v)
        elif isinstance(v, list | tuple):
            return _array_parts(v)
        else:
            raise TypeError(f"not a JSON value: {type(v).__name__}")
        return None

    it = emit(value)
    if it is not None:
        stack.append(it)
    while stack:
        try:
            part = next(stack[-1])
        except StopIteration:
            stack.pop()
            continue
        if isinstance(part, _Raw):
            out.append(part.text)
        else:
            child = emit(part.value)
            if child is not None:
                stack.append(child)
    return "".join(out)


@dataclass(frozen=True)
class _Raw:
    text: str


@dataclass(frozen=True)
class _Val:
    value: Any


def _object_parts(obj: dict[str, Any]) -> Iterator[_Raw | _Val]:
    yield _Raw("{")
    for i, key in enumerate(js_key_order(obj)):
        yield _Raw(("," if i else "") + _js_string(key) + ":")
        yield _Val(obj[key])
    yield _Raw("}")


def _array_parts(arr: list[Any] | tuple[Any, ...]) -> Iterator[_Raw | _Val]:
    yield _Raw("[")
    for i, item in enumerate(arr):
        if i:
            yield _Raw(",")
        yield _Val(item)
    yield _Raw("]")


def fingerprint(tool_id: str, arguments: Any) -> str:
    """sha256 hex of ``JSON.stringify([toolId, arguments])`` (UTF-8), as the upstream hub."""
    return hashlib.sha256(js_json_stringify([tool_id, arguments]).encode("utf-8")).hexdigest()


# -- the body -------------------------------------------------------------------------------

TOOL_FIELDS = ("leaseId", "toolId", "callId", "arguments")


@dataclass(frozen=True)
class ToolRequest:
    """A well-formed ``tool`` body."""

    lease_id: str
    tool_id: str
    call_id: str
    arguments: dict[str, Any]


#: Shape checks as data (strict object: exactly these keys).
_CHECKS: dict[str, Any] = {
    "leaseId": lambda v: isinstance(v, str) and bool(UUID_RE.match(v)),
    "toolId": lambda v: isinstance(v, str) and 1 <= js_length(v) <= 100,
    "callId": lambda v: isinstance(v, str) and 1 <= js_length(v) <= 200,
    "arguments": lambda v: isinstance(v, dict),
}


def parse_tool_body(body: object) -> ToolRequest | Decision:
    """Check the strict ``tool`` body; a bad one gives a 400 reject ``Decision``."""
    if not isinstance(body, dict) or set(body) != set(TOOL_FIELDS):
        return Decision.reject("shape")
    if not all(check(body[key]) for key, check in _CHECKS.items()):
        return Decision.reject("shape")
    return ToolRequest(body["leaseId"], body["toolId"], body["callId"], body["arguments"])


# -- dedupe ---------------------------------------------------------------------------------

@dataclass
class CallRecord:
    """The first call of one callId. ``attachment`` is a free slot for the IO layer."""

    call_id: str
    tool_id: str
    fingerprint: str
    done: bool = False
    outcome: Any = None
    attachment: Any = None


@dataclass(frozen=True)
class Decision:
    """What to do with one tool call."""

    action: Literal["run", "join", "reject"]
    status: int = 200
    code: str | None = None
    message: str | None = None
    record: CallRecord | None = None

    @classmethod
    def reject(cls, name: str) -> Decision:
        row, message = ERRORS[name]
        return cls("reject", row.status, row.code, message)

    @property
    def done(self) -> bool:
        return self.record is not None and self.record.done

    @property
    def body(self) -> dict[str, str] | None:
        """The error body of a reject, else ``None``."""
        if self.action != "reject":
            return None
        return error_body(self.code or "", self.message or "")


class LeaseCalls:
    """The tool calls of one hub lease."""

    def __init__(self, limit: int = CALL_LIMIT) -> None:
        self.limit = limit
        self.calls: dict[str, CallRecord] = {}
        self.executions: Counter[str] = Counter()

    @property
    def total_executions(self) -> int:
        return sum(self.executions.values())

    def begin(self, call_id: str, tool_id: str, arguments: Any) -> Decision:
        """Decide a call: run it, join the first call of the same callId, or reject."""
        fp = fingerprint(tool_id, arguments)
        known = self.calls.get(call_id)
        if known is not None:
            if known.fingerprint != fp:
                return Decision.reject("conflict")
            return Decision("join", record=known)
        if len(self.calls) >= self.limit:
            return Decision.reject("limit")
        record = CallRecord(call_id, tool_id, fp)
        self.calls[call_id] = record
        self.executions[call_id] += 1
        return Decision("run", record=record)

    def finish(self, call_id: str, outcome: Any) -> CallRecord:
        """Store the first call's outcome (success or failure); later joins share it."""
        record = self.calls[call_id]
        if not record.done:
            record.done = True
            record.outcome = outcome
        return record
