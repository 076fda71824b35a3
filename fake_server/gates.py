"""The machine-API gate sequence of protocol 1 (§2.3), sans-IO.

Rules (everything that decides whether a runner request gets past the front door lives here):
- The gates run in the fixed order of ``GATES``; the first refusal wins. Gate 0 is the Host
  allow-list of §2.1 (421 ``invalid_host``), which upstream runs before the runner middleware.
- Gates 1-7 look only at headers and the runner's in-memory state; they never read the body.
- Gates 3, 6 and 8 do not refuse but *change* state; they are returned as ``Action``s, in order,
  for the hub to apply, so this module stays free of I/O and of the hub's data structures.
- Gates 9-10 (method, then body) run after the state change of gate 8, as upstream does.
- An unknown route is refused after gate 1 with 404 ``not_found`` (upstream mounts only the
  listed routes; what it answers for others is not determined, so we pick the least informative).

This module knows nothing of the runner implementation; it judges a request from the wire.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import json
import re
from collections.abc import Callable
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

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
UUID_RE = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")


@dataclass(frozen=True)
class Refusal:
    status: int
    code: str
    message: str


class Action(Enum):
    RESET = "reset"  # gate 3: drop the online state (a disconnect), forcing a new epoch
    REPLACE = "replace"  # gate 6: retire the old instance and disconnect it
    ENSURE_ONLINE = "ensure_online"  # gate 8: create state if missing, refresh seen, features


@dataclass(frozen=True)
class Ask:
    """What the gates need to know about one request (headers only)."""

    route: str
    method: str
    has_origin: bool
    authorization: str | None
    instance: str | None
    protocol: str | None
    epoch: str | None
    reset: bool
    features: str | None
    host: str | None = None
    allowed_hosts: frozenset[str] | None = None  # None: any Host (the check is off)


@dataclass
class RunnerView:
    """What the gates need to know about the runner (filled in by the hub)."""

    exists: bool = False
    enabled: bool = False
    token_hash: str = ""
    online_instance: str | None = None
    online_epoch: str | None = None
    retired: AbstractSet[str] = field(default_factory=frozenset)  # read-only here
    retired_limit: int = 256


@dataclass
class Decision:
    refusal: Refusal | None
    actions: list[Action]
    gate: str  # name of the refusing gate, or "passed"


def _bearer_ok(ask: Ask, view: RunnerView) -> bool:
    auth = ask.authorization or ""
    if not auth.startswith("Bearer "):
        return False
    got = hashlib.sha256(auth[len("Bearer "):].encode("utf-8", "surrogateescape")).hexdigest()
    return hmac.compare_digest(got.encode(), (view.token_hash or "x").encode())


# Each gate: (name, check) where check(ask, view, actions) -> Refusal | None and may append
# actions. The view is updated in place by actions that the *following* gates must see.
Gate = Callable[[Ask, RunnerView, list[Action]], Refusal | None]


def _g0_host(ask: Ask, view: RunnerView, actions: list[Action]) -> Refusal | None:
    if ask.allowed_hosts is not None and (ask.host or "").lower() not in ask.allowed_hosts:
        return Refusal(421, "invalid_host", "invalid host")
    return None


def _g1_auth(ask: Ask, view: RunnerView, actions: list[Action]) -> Refusal | None:
    if ask.has_origin or not view.exists or not view.enabled or not _bearer_ok(ask, view):
        return Refusal(403, "runner_unauthorized", "runner unauthorized")
    return None


def _g_route(ask: Ask, view: RunnerView, actions: list[Action]) -> Refusal | None:
    if ask.route not in ROUTES:
        return Refusal(404, "not_found", "unknown runner route")
    return None


def _g2_protocol(ask: Ask, view: RunnerView, actions: list[Action]) -> Refusal | None:
    if ask.instance is None or not UUID_RE.match(ask.instance) or ask.protocol != "1":
        return Refusal(409, "runner_protocol_mismatch", "runner protocol mismatch")
    return None


def _g3_reset(ask: Ask, view: RunnerView, actions: list[Action]) -> Refusal | None:
    if ask.route == "poll" and ask.reset and view.online_instance == ask.instance:
        actions.append(Action.RESET)
        view.online_instance = view.online_epoch = None
    return None


def _g4_instance(ask: Ask, view: RunnerView, actions: list[Action]) -> Refusal | None:
    if ask.route != "poll" and (view.online_instance is None or view.online_instance != ask.instance):
        return Refusal(409, "runner_instance_changed", "runner instance changed")
    return None


def _g5_retired(ask: Ask, view: RunnerView, actions: list[Action]) -> Refusal | None:
    if ask.instance in view.retired:
        return Refusal(409, "runner_instance_retired", "runner instance retired")
    return None


def _g6_replace(ask: Ask, view: RunnerView, actions: list[Action]) -> Refusal | None:
    if ask.route == "poll" and view.online_instance is not None and view.online_instance != ask.instance:
        if len(view.retired) >= view.retired_limit:
            return Refusal(409, "runner_instance_limit", "too many replaced runner instances")
        actions.append(Action.REPLACE)
        view.retired = view.retired | {view.online_instance}
        view.online_instance = view.online_epoch = None
    return None


def _g7_epoch(ask: Ask, view: RunnerView, actions: list[Action]) -> Refusal | None:
    if ask.route != "poll" and ask.epoch != view.online_epoch:
        return Refusal(409, "runner_epoch_changed", "runner epoch changed")
    return None


def _g8_online(ask: Ask, view: RunnerView, actions: list[Action]) -> Refusal | None:
    actions.append(Action.ENSURE_ONLINE)
    return None


def _g9_method(ask: Ask, view: RunnerView, actions: list[Action]) -> Refusal | None:
    want = "GET" if ask.route == "poll" else "POST"
    if ask.method != want:
        return Refusal(405, "method_not_allowed", "method not allowed")
    return None


GATES: tuple[tuple[str, Gate], ...] = (
    ("0 host", _g0_host),
    ("1 unauthorized", _g1_auth),
    ("route", _g_route),
    ("2 protocol", _g2_protocol),
    ("3 reset", _g3_reset),
    ("4 instance", _g4_instance),
    ("5 retired", _g5_retired),
    ("6 replace", _g6_replace),
    ("7 epoch", _g7_epoch),
    ("8 online", _g8_online),
    ("9 method", _g9_method),
)


def decide(ask: Ask, view: RunnerView) -> Decision:
    """Run gates 0-9 in order. Gate 10 (body) is ``check_body`` once the body is read."""
    actions: list[Action] = []
    for name, gate in GATES:
        refusal = gate(ask, view, actions)
        if refusal is not None:
            # State changes only take effect when every gate up to 8 passed, except that a
            # refusal after gate 8 (method) still leaves the runner online, as upstream.
            kept = actions if name == "9 method" else []
            return Decision(refusal, kept, name)
    return Decision(None, actions, "passed")


def body_limit(route: str, request_body: int, desktop_body: int) -> int:
    return desktop_body if route == "desktop" else request_body


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def check_body(raw: bytes | None, limit: int) -> tuple[dict[str, Any] | None, Refusal | None]:
    """Gate 10: size, then JSON object. ``raw`` None means the body exceeded ``limit``."""
    if raw is None or len(raw) > limit:
        return None, Refusal(413, "runner_payload_limit", "request body too large")
    try:
        # As JSON.parse over a UTF-8 decoded Buffer: bad bytes become U+FFFD, NaN/Infinity refused.
        value = json.loads(raw.decode("utf-8", errors="replace"), parse_constant=_no_constant)
    except (ValueError, RecursionError):
        return None, Refusal(400, "invalid_json", "invalid JSON body")
    if not isinstance(value, dict):
        return None, Refusal(400, "invalid_json", "body must be a JSON object")
    return value, None


@functools.lru_cache(maxsize=256)
def parse_features(header: str | None) -> tuple[str, ...] | None:
    """Accepted features in header order; None when the header is absent or empty (keep stored)."""
    if header is None:
        return None
    names = [n.strip() for n in header.split(",")]
    names = [n for n in names if n]
    if not names:
        return None
    seen: list[str] = []
    for n in names:
        if n in _ACCEPTED and n not in seen:
            seen.append(n)
    return tuple(seen)
