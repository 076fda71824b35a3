"""The machine-API gate sequence of protocol 1 (§2.3), sans-IO.

Rules (everything that decides whether a runner request gets past the front door lives here):
- The gates are the rows of ``GATES`` (``Gate(number, name, status, code, message, refuses,
  action)``) and ``decide`` runs them in order; the first refusal wins. Gate 0 is the Host
  allow-list of §2.1 (421 ``invalid_host``), which upstream runs before the runner middleware.
- Gates 1-7 look only at headers and the runner's in-memory state; they never read the body.
- Gates 3, 6 and 8 *change* state: their ``action`` is returned as an ``Action``, in order, for
  the hub to apply, and ``decide`` applies its effect to a copy of the view the later gates see
  (``RunnerView`` is frozen: no gate mutates its input). Gate 6 may also refuse (the 256 limit).
- Gates 9-10 (method, then body) run after the state change of gate 8, as upstream does; gate 9
  is marked ``keeps_actions_on_refusal`` for that reason.
- Gate 2: ``x-runner-instance`` must match ``^[0-9a-f-]{36}$`` (lower case, as upstream).
- Gate 1: an empty ``Origin`` counts as absent (upstream reads ``ctx.get('origin')``).
- ``x-runner-features`` (``parse_features``): absent or empty leaves the stored list alone;
  otherwise ``split(",")``, no trim, no de-duplication, unknown names dropped.
- ⚑ Host allow-list: the exact ``host:port`` set the control plane computes; upstream also
  accepts a private host with no port, 80 or 443 (and configured hosts on any port).
- An unknown route is refused after gate 1 with 404 ``not_found`` (upstream mounts only the
  listed routes; what it answers for others is not determined, so we pick the least informative).

This module knows nothing of the runner implementation; it judges a request from the wire. The
runner side has its own, independent reading of these rules in ``runner_ref`` (written twice on
purpose, so that each can be checked against the other).
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import json
import re
from collections.abc import Callable, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Any, Generic, TypeVar

from . import codes
from .codes import Code

ROUTES = frozenset(
    {
        "poll", "admit", "result", "event", "tool", "check", "artifact", "control-check",
        "local-vm-check", "browser-check", "desktop", "execution-context", "network-settings",
    }
)

ACCEPTED_FEATURES = (
    "execution-context-v1", "vm-egress-v1", "workspace-memory-bind-v1", "hermes-computer-v2",
    "profile-computer-v1", "host-computer-tools-v1", "file-transfer-v1", "idle-stop-policy-v1",
    "computer-worker-v1", "artifact-chunks-v1", "helper-retirement-v1", "computer-control-v1",
    "shared-computer-v1", "local-vm-v1", "image-options-v1", "image-ready-v1",
    "compose-desktops-v1", "managed-browser-v1", "managed-browser-setup-v1",
    "managed-browser-disabled-v1", "managed-browser-retention-v1", "credential-ref-v1",
)
_ACCEPTED = frozenset(ACCEPTED_FEATURES)

RUNNER_ID_RE = re.compile(r"^[0-9a-f-]{36}$")
#: Gate 2's instance format, as upstream's middleware: 36 characters of lower-case hex and dashes
#: (so an upper-case UUID is refused, and an oddly dashed 36-character string is not).
INSTANCE_RE = re.compile(r"^[0-9a-f-]{36}$")
#: Any-case 8-4-4-4-12 hex; used by ``tool_calls`` for the server-issued ``leaseId``.
UUID_RE = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")


@dataclass(frozen=True)
class Refusal:
    status: int
    code: str
    message: str


def _refusal(row: Code, message: str | None = None) -> Refusal:
    return Refusal(row.status, row.code, row.message if message is None else message)


class Action(Enum):
    RESET = "reset"  # gate 3: drop the online state (a disconnect), forcing a new epoch
    REPLACE = "replace"  # gate 6: retire the old instance and disconnect it
    ENSURE_ONLINE = "ensure_online"  # gate 8: create state if missing, refresh seen, features


@dataclass(frozen=True)
class Ask:
    """What the gates need to know about one request (headers only)."""

    route: str
    method: str
    origin: str | None
    authorization: str | None
    instance: str | None
    protocol: str | None
    epoch: str | None
    reset: bool
    features: str | None
    host: str | None = None
    allowed_hosts: frozenset[str] | None = None  # None: any Host (the check is off)

    @classmethod
    def from_headers(
        cls, route: str, method: str, headers: Mapping[str, str],
        allowed_hosts: frozenset[str] | None = None,
    ) -> Ask:
        """The gates' view of a request's headers (header names are case-insensitive)."""
        return cls(
            route=route,
            method=method,
            origin=headers.get("Origin"),
            authorization=headers.get("Authorization"),
            instance=headers.get("x-runner-instance"),
            protocol=headers.get("x-runner-protocol"),
            epoch=headers.get("x-runner-epoch"),
            reset=headers.get("x-runner-reset") == "1",
            features=headers.get("x-runner-features"),
            host=headers.get("Host"),
            allowed_hosts=allowed_hosts,
        )


@dataclass(frozen=True)
class RunnerView:
    """What the gates need to know about the runner (filled in by the hub; never mutated)."""

    exists: bool = False
    enabled: bool = False
    token_hash: str = ""
    online_instance: str | None = None
    online_epoch: str | None = None
    retired: AbstractSet[str] = field(default_factory=frozenset)
    retired_limit: int = 256


@dataclass(frozen=True)
class Decision:
    refusal: Refusal | None
    actions: list[Action]
    gate: str  # name of the refusing gate, or "passed"
    view: RunnerView  # the view as the gates left it (a copy; the input is untouched)


def _bearer_ok(ask: Ask, view: RunnerView) -> bool:
    auth = ask.authorization or ""
    if not auth.startswith("Bearer "):
        return False
    got = hashlib.sha256(auth[len("Bearer "):].encode("utf-8", "surrogateescape")).hexdigest()
    return hmac.compare_digest(got.encode(), (view.token_hash or "x").encode())


AskT = TypeVar("AskT")
ViewT = TypeVar("ViewT")


@dataclass(frozen=True)
class Step(Generic[AskT, ViewT]):
    """A state change a gate asks for: when ``applies``, ``action`` is returned for the caller to
    apply and ``effect`` updates the (copied) view the later gates see."""

    action: Action
    applies: Callable[[AskT, ViewT], bool]
    effect: Callable[[ViewT], ViewT]


@dataclass(frozen=True)
class Gate(Generic[AskT, ViewT]):
    """One row of a gate sequence: refused with (status, code, message) when ``refuses`` holds,
    else ``action`` (if any) applies. A gate that only acts never refuses (status 0, no code).
    The same row type serves the machine API (``GATES``) and the admin API (``admin_gates``)."""

    number: int | None  # the reference's number; None for a check it does not number
    name: str
    status: int
    code: str
    message: str
    refuses: Callable[[AskT, ViewT], bool]
    action: Step[AskT, ViewT] | None = None
    #: Upstream answers this refusal after the state change of gate 8, so the actions stay.
    keeps_actions_on_refusal: bool = False


def gate_row(
    number: int | None, name: str, row: Code, refuses: Callable[[AskT, ViewT], bool],
    action: Step[AskT, ViewT] | None = None, *, keeps_actions_on_refusal: bool = False,
) -> Gate[AskT, ViewT]:
    """A refusing row whose status and message are the code's row of ``codes``."""
    return Gate(number, name, row.status, row.code, row.message, refuses, action,
                keeps_actions_on_refusal)


def first_refusal(
    gates: tuple[Gate[AskT, ViewT], ...], ask: AskT, view: ViewT
) -> Gate[AskT, ViewT] | None:
    """The first row that refuses (for sequences without actions, such as the admin API's)."""
    return next((g for g in gates if g.refuses(ask, view)), None)


MachineGate = Gate[Ask, RunnerView]


_row = gate_row


def _never(ask: Ask, view: RunnerView) -> bool:
    return False


def _act(number: int, name: str, step: Step[Ask, RunnerView]) -> MachineGate:
    """A gate that only changes state (status 0 and no code: it never refuses)."""
    return Gate(number, name, 0, "", "", _never, step)


def _offline(view: RunnerView) -> RunnerView:
    return replace(view, online_instance=None, online_epoch=None)


def _retire(view: RunnerView) -> RunnerView:
    assert view.online_instance is not None
    return _offline(replace(view, retired=frozenset(view.retired) | {view.online_instance}))


def _replaces(ask: Ask, view: RunnerView) -> bool:
    return ask.route == "poll" and view.online_instance is not None and view.online_instance != ask.instance


def _same(view: RunnerView) -> RunnerView:
    return view


GATES: tuple[MachineGate, ...] = (
    _row(0, "0 host", codes.INVALID_HOST,
         lambda a, v: a.allowed_hosts is not None and (a.host or "").lower() not in a.allowed_hosts),
    # upstream's ctx.get('origin') is '' for an absent header, so an empty Origin counts as absent
    _row(1, "1 unauthorized", codes.RUNNER_UNAUTHORIZED,
         lambda a, v: bool(a.origin) or not v.exists or not v.enabled or not _bearer_ok(a, v)),
    _row(None, "route", codes.NOT_FOUND, lambda a, v: a.route not in ROUTES),
    _row(2, "2 protocol", codes.RUNNER_PROTOCOL_MISMATCH,
         lambda a, v: a.instance is None or not INSTANCE_RE.match(a.instance) or a.protocol != "1"),
    _act(3, "3 reset", Step(
        Action.RESET,
        lambda a, v: a.route == "poll" and a.reset and v.online_instance == a.instance,
        _offline)),
    _row(4, "4 instance", codes.RUNNER_INSTANCE_CHANGED,
         lambda a, v: a.route != "poll" and (v.online_instance is None or v.online_instance != a.instance)),
    _row(5, "5 retired", codes.RUNNER_INSTANCE_RETIRED, lambda a, v: a.instance in v.retired),
    _row(6, "6 replace", codes.RUNNER_INSTANCE_LIMIT,
         lambda a, v: _replaces(a, v) and len(v.retired) >= v.retired_limit,
         Step(Action.REPLACE, _replaces, _retire)),
    _row(7, "7 epoch", codes.RUNNER_EPOCH_CHANGED,
         lambda a, v: a.route != "poll" and a.epoch != v.online_epoch),
    _act(8, "8 online", Step(Action.ENSURE_ONLINE, lambda a, v: True, _same)),
    _row(9, "9 method", codes.METHOD_NOT_ALLOWED,
         lambda a, v: a.method != ("GET" if a.route == "poll" else "POST"),
         keeps_actions_on_refusal=True),
)


def decide(ask: Ask, view: RunnerView) -> Decision:
    """Run gates 0-9 in order on a copy of ``view``. Gate 10 (body) is ``check_body``.

    State changes take effect only when every gate up to 8 passed; a refusal by a gate marked
    ``keeps_actions_on_refusal`` (the method, after gate 8) keeps them, as upstream."""
    actions: list[Action] = []
    seen = view
    for gate in GATES:
        if gate.refuses(ask, seen):
            kept = actions if gate.keeps_actions_on_refusal else []
            return Decision(Refusal(gate.status, gate.code, gate.message), kept, gate.name, seen)
        step = gate.action
        if step is not None and step.applies(ask, seen):
            actions.append(step.action)
            seen = step.effect(seen)
    return Decision(None, actions, "passed", seen)


def body_limit(route: str, request_body: int, desktop_body: int) -> int:
    return desktop_body if route == "desktop" else request_body


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def check_body(raw: bytes | None, limit: int) -> tuple[dict[str, Any] | None, Refusal | None]:
    """Gate 10: size, then JSON object. ``raw`` None means the body exceeded ``limit``."""
    if raw is None or len(raw) > limit:
        return None, _refusal(codes.RUNNER_PAYLOAD_LIMIT)
    try:
        # As JSON.parse over a UTF-8 decoded Buffer: bad bytes become U+FFFD, NaN/Infinity refused.
        value = json.loads(raw.decode("utf-8", errors="replace"), parse_constant=_no_constant)
    except (ValueError, RecursionError):
        return None, _refusal(codes.INVALID_JSON)
    if not isinstance(value, dict):
        return None, _refusal(codes.INVALID_JSON, "body must be a JSON object")
    return value, None


@functools.lru_cache(maxsize=256)
def parse_features(header: str | None) -> tuple[str, ...] | None:
    """The accepted features of an ``x-runner-features`` header, in header order.

    As upstream: a header that is absent or empty gives None (the list is left unchanged);
    otherwise ``split(",")`` with no trimming and no de-duplication, unknown names dropped, so
    ``"a, b"`` keeps only ``a`` and ``",,"`` gives ``()``."""
    if not header:
        return None
    return tuple(name for name in header.split(",") if name in _ACCEPTED)
