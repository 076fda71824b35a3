"""The loopback listener's request gates, sans-IO (protocol-reference §6).

Rules of this module:
- Everything that decides whether a request to a lease's loopback listener is accepted lives here:
  the gates, their order, their status and code, and the JSON limits. No I/O; the aiohttp handler
  in ``listener.py`` only translates a request into a ``GateInput`` and the verdict back to HTTP.
- Gates run in the order of ``GATES``; the first that fails decides the answer. A request passes
  only when every gate passes, and then the verdict carries the parsed JSON body.
- The gates are split in two phases so the listener never reads a body it will refuse:
  ``HEAD_GATES`` need only the request head (peer, Host, Origin, Authorization, lease state, method,
  content type, declared length); ``BODY_GATES`` need the body bytes.

Order (§6): 403 ``team_tools_forbidden`` (peer not 127.0.0.1, Host not exactly
``127.0.0.1:<port>``, any Origin) → 401 ``team_tools_unauthorized`` (Bearer token, constant time)
→ 410 ``team_tools_expired`` → 405 ``method_not_allowed`` (not POST) → 415 ``invalid_content_type``
(not ``application/json``) → 413 ``team_tool_input_limit`` (body > 256 KiB) → 400 ``invalid_json``.

Our choices where upstream is not determined:
- JSON nesting deeper than ``MAX_DEPTH`` (30 levels, the body object being level 1) is refused as
  400 ``invalid_json``, as are NaN/Infinity literals, invalid UTF-8 and a body that is not an object.
- Routing (404 ``not_found`` for other paths) is decided only after all gates pass, so an
  unauthenticated caller learns nothing about paths.
- ``/tools/list`` accepts any JSON object as its body (upstream sends ``{}``).

The gate order, statuses and limits are the protocol's; where the control plane checks the same
rules (body limits, Host/Origin, tokens) they are written independently in fake_server on
purpose.
"""
from __future__ import annotations

import hmac
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from runner_ref import codes
from runner_ref.codes import Code, error_body
from runner_ref.timings import LISTENER_MAX_BODY, LISTENER_MAX_DEPTH

MAX_BODY_BYTES = LISTENER_MAX_BODY
MAX_DEPTH = LISTENER_MAX_DEPTH
ALLOWED_PEER = "127.0.0.1"


@dataclass(frozen=True)
class GateInput:
    """What the gates look at. ``body`` is ``None`` while only the head is known."""

    peer_ip: str | None
    host: str | None
    origin: str | None
    authorization: str | None
    lease_active: bool
    method: str
    content_type: str | None
    content_length: int | None
    body: bytes | None = None
    host_count: int = 1  # more than one Host header is refused like a wrong Host


@dataclass(frozen=True)
class Context:
    """Per-listener facts the gates compare against."""

    port: int
    token: str


@dataclass(frozen=True)
class Refusal:
    row: Code

    @property
    def status(self) -> int:
        return self.row.status

    @property
    def code(self) -> str:
        return self.row.code

    @property
    def message(self) -> str:
        return self.row.message

    def body(self) -> dict[str, str]:
        return error_body(self.row)


@dataclass(frozen=True)
class Accepted:
    body: dict[str, Any]


@dataclass(frozen=True)
class Gate:
    """One gate: its name, the row of :mod:`runner_ref.codes` it refuses with (status, code,
    message), and its predicate."""

    name: str
    row: Code
    passes: Callable[[GateInput, Context], bool]

    @property
    def status(self) -> int:
        return self.row.status

    @property
    def code(self) -> str:
        return self.row.code

    @property
    def message(self) -> str:
        return self.row.message


def _forbidden_ok(req: GateInput, ctx: Context) -> bool:
    return (
        req.peer_ip == ALLOWED_PEER
        and req.host_count == 1
        and req.host == f"{ALLOWED_PEER}:{ctx.port}"
        and req.origin is None
    )


def _token_ok(req: GateInput, ctx: Context) -> bool:
    header = req.authorization or ""
    presented = header[len("Bearer "):] if header.startswith("Bearer ") else ""
    # Compare even when the scheme is wrong so timing does not tell the two cases apart.
    match = hmac.compare_digest(presented.encode("utf-8", "replace"), ctx.token.encode())
    return match and header.startswith("Bearer ")


def _media_type(content_type: str | None) -> str:
    return (content_type or "").split(";", 1)[0].strip().lower()


def _length_ok(req: GateInput, ctx: Context) -> bool:
    if req.content_length is not None and req.content_length > MAX_BODY_BYTES:
        return False
    return req.body is None or len(req.body) <= MAX_BODY_BYTES


def _reject_constant(name: str) -> Any:
    raise ValueError(f"non-standard JSON constant {name}")


def depth_of(value: Any) -> int:
    """Nesting depth of containers in a parsed JSON value (scalars 0, ``{}`` 1), iteratively."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict):
            deepest = max(deepest, level)
            stack.extend((v, level + 1) for v in item.values())
        elif isinstance(item, list):
            deepest = max(deepest, level)
            stack.extend((v, level + 1) for v in item)
    return deepest


def parse_body(body: bytes) -> dict[str, Any] | None:
    """The body as a JSON object within ``MAX_DEPTH``, or ``None`` if it is not one."""
    try:
        value = json.loads(body.decode("utf-8"), parse_constant=_reject_constant)
    except (ValueError, RecursionError):
        return None
    if not isinstance(value, dict) or depth_of(value) > MAX_DEPTH:
        return None
    return value


def _json_ok(req: GateInput, ctx: Context) -> bool:
    return req.body is not None and parse_body(req.body) is not None


_SIZE = Gate("size", codes.TEAM_TOOL_INPUT_LIMIT, _length_ok)
HEAD_GATES: tuple[Gate, ...] = (
    Gate("loopback", codes.TEAM_TOOLS_FORBIDDEN, _forbidden_ok),
    Gate("token", codes.TEAM_TOOLS_UNAUTHORIZED, _token_ok),
    Gate("lease", codes.TEAM_TOOLS_EXPIRED, lambda req, ctx: req.lease_active),
    Gate("method", codes.METHOD_NOT_ALLOWED, lambda req, ctx: req.method == "POST"),
    Gate("content-type", codes.INVALID_CONTENT_TYPE,
         lambda req, ctx: _media_type(req.content_type) == "application/json"),
    _SIZE,   # on the declared length here, on the bytes read in BODY_GATES
)
BODY_GATES: tuple[Gate, ...] = (
    _SIZE,
    Gate("json", codes.INVALID_JSON, _json_ok),
)
GATES: tuple[Gate, ...] = HEAD_GATES + BODY_GATES[1:]


def first_failure(req: GateInput, ctx: Context, gates: tuple[Gate, ...]) -> Refusal | None:
    for gate in gates:
        if not gate.passes(req, ctx):
            return Refusal(gate.row)
    return None


def check_head(req: GateInput, ctx: Context) -> Refusal | None:
    """Phase 1: the head gates; ``None`` means "read the body now (at most MAX_BODY_BYTES+1)"."""
    return first_failure(req, ctx, HEAD_GATES)


def check(req: GateInput, ctx: Context) -> Refusal | Accepted:
    """All gates in order; ``req.body`` must be set. Returns the refusal or the parsed body."""
    refusal = first_failure(req, ctx, GATES)
    if refusal is not None:
        return refusal
    assert req.body is not None
    parsed = parse_body(req.body)
    assert parsed is not None
    return Accepted(parsed)
