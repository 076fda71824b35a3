"""Admit and enqueue validity, sans-IO: rows of (reason, predicate) over already-fetched facts.

Rules (each row below is what runs; the first row that refuses gives the REASON):
- Scope (who a command or channel acts for): the account, when one is named, exists, is active
  and its authorization version has not moved since the command (or channel) was made; the
  named profile is in the effective set runner ∩ account ∩ source.
- Channel validity: not revoked, not closed, still the runner's registered channel, runner
  enabled, and its scope valid (profile included).
- Admit: the command is still queued (not ended) and unexpired; the runner is enabled; a
  gateway command's channel is registered and owned, and valid unless the method is a stop
  method (exempt: it must still reach the runner after a revocation); a lease command's hub
  lease is active; the command's scope is valid. Upstream's admit closures do not re-check the
  command's PROFILE: that check runs only when ``Extras.admit_checks_profile`` is set.
- Enqueue (the caller's refusals, in upstream order for the queue part): account not
  authorized → 403, profile not allowed → 403, runner offline (no online state, or disabled)
  → 503, channel not valid → 403, pending count → 429, one command over the limit → 413,
  queued bytes → 429.
- Stop methods (``session.interrupt``, ``session.close``, ``session.active_list``) are exempt
  from channel validity and carry no account or profile: defined here, once.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar
from urllib.parse import parse_qs

from . import codes
from .codes import Code

STOP_METHODS = frozenset({"session.interrupt", "session.close", "session.active_list"})
CHANNEL_KINDS = frozenset({"gateway.open", "gateway.rpc"})
LEASE_KINDS = frozenset({"lease.create", "lease.bind"})

F = TypeVar("F")


@dataclass(frozen=True)
class Rule(Generic[F]):
    reason: str
    refuses: Callable[[F], bool]


def first_refusal(rules: Sequence[Rule[F]], facts: F) -> str | None:
    """The reason of the first rule that refuses, or None when every rule passes."""
    for rule in rules:
        if rule.refuses(facts):
            return rule.reason
    return None


def is_stop(kind: str, payload: dict[str, Any]) -> bool:
    return kind == "gateway.rpc" and payload.get("method") in STOP_METHODS


def command_profile(kind: str, payload: dict[str, Any]) -> str | None:
    """The profile a command names (payload.profile, the http search, or rpc params.profile)."""
    p = payload.get("profile")
    if isinstance(p, str):
        return p
    if kind == "http":
        search = payload.get("search")
        if isinstance(search, str) and search:
            values = parse_qs(search.lstrip("?")).get("profile")
            if values:
                return values[0]
    if kind == "gateway.rpc":
        params = payload.get("params")
        if isinstance(params, dict) and isinstance(params.get("profile"), str):
            return str(params["profile"])
    return None


def effective_profiles(
    runner_profiles: Sequence[str] | None, account_profiles: Sequence[str] | None,
    source_profiles: Sequence[str] | None, *, account_named: bool,
) -> frozenset[str] | None:
    """runner ∩ account ∩ source (None: the runner is unknown; an unknown account: empty)."""
    if runner_profiles is None:
        return None
    eff = set(runner_profiles)
    if account_named:
        eff &= set(account_profiles or ())
    if source_profiles is not None:
        eff &= set(source_profiles)
    return frozenset(eff)


# -- scope ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ScopeFacts:
    account: str | None  # the account the command/channel acts for (None: none)
    version: int  # its authorization version when the command/channel was made
    account_exists: bool
    account_active: bool
    account_version: int
    profile: str | None
    effective: frozenset[str] | None
    check_profile: bool = True


SCOPE_RULES: tuple[Rule[ScopeFacts], ...] = (
    Rule("account unknown", lambda f: f.account is not None and not f.account_exists),
    Rule("account inactive", lambda f: f.account is not None and not f.account_active),
    Rule("authorization_version moved", lambda f: f.account is not None and f.account_version != f.version),
    Rule("profile not effective", lambda f: f.check_profile and f.profile is not None
         and (f.effective is None or f.profile not in f.effective)),
)


# -- channel -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ChannelFacts:
    revoked: bool
    closed: bool
    registered: bool  # still the runner's channel under its connection id
    runner_enabled: bool
    scope: ScopeFacts


CHANNEL_RULES: tuple[Rule[ChannelFacts], ...] = (
    Rule("channel revoked", lambda f: f.revoked),
    Rule("channel closed", lambda f: f.closed),
    Rule("channel not registered", lambda f: not f.registered),
    Rule("runner disabled", lambda f: not f.runner_enabled),
)


def channel_refusal(facts: ChannelFacts) -> str | None:
    return first_refusal(CHANNEL_RULES, facts) or first_refusal(SCOPE_RULES, facts.scope)


# -- admit ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class AdmitFacts:
    known: bool  # the id names a command queued for this runner
    ended: bool
    now_ms: int
    expires_at_ms: int
    runner_enabled: bool
    kind: str
    stop_method: bool
    channel_present: bool  # the command's channel is registered and owned by the runner
    channel_refusal: str | None  # the channel's own refusal (see CHANNEL_RULES)
    lease_active: bool
    scope: ScopeFacts | None  # None when the command is unknown


ADMIT_RULES: tuple[Rule[AdmitFacts], ...] = (
    Rule("unknown command", lambda f: not f.known),
    Rule("command ended", lambda f: f.ended),
    Rule("expired", lambda f: f.now_ms >= f.expires_at_ms),
    Rule("runner disabled", lambda f: not f.runner_enabled),
    Rule("channel closed", lambda f: f.kind in CHANNEL_KINDS and not f.channel_present),
    Rule("channel not valid", lambda f: f.kind in CHANNEL_KINDS and not f.stop_method
         and f.channel_refusal is not None),
    Rule("lease not active", lambda f: f.kind in LEASE_KINDS and not f.lease_active),
)


def admit_refusal(facts: AdmitFacts) -> str | None:
    """None: admitted. Else the reason, e.g. "expired" or "channel not valid: channel revoked"."""
    reason = first_refusal(ADMIT_RULES, facts)
    if reason == "channel not valid" and facts.channel_refusal:
        return f"{reason}: {facts.channel_refusal}"
    if reason is not None:
        return reason
    if facts.stop_method:
        return None
    assert facts.scope is not None
    return first_refusal(SCOPE_RULES, facts.scope)


# -- enqueue -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class EnqueueFacts:
    account: str | None
    account_ok: bool  # the named account exists and is active
    profile: str | None
    effective: frozenset[str] | None
    online: bool  # an online state exists and the runner is enabled
    channel_refusal: str | None  # for gateway.rpc on a channel (None: fine or no channel)
    pending: int
    pending_limit: int
    size: int
    single_limit: int
    queued_bytes: int
    queued_limit: int


@dataclass(frozen=True)
class EnqueueRule:
    reason: str
    status: int
    code: str
    message: str
    refuses: Callable[[EnqueueFacts], bool]


def _enqueue_rule(reason: str, row: Code, message: str, refuses: Callable[[EnqueueFacts], bool],
                  *, status: int | None = None) -> EnqueueRule:
    """A refusing row whose code (and status, unless it is the code's second one) is its row of
    ``codes``."""
    return EnqueueRule(reason, row.status if status is None else status, row.code, message, refuses)


ENQUEUE_RULES: tuple[EnqueueRule, ...] = (
    _enqueue_rule("account not authorized", codes.RUNNER_AUTHORIZATION_REVOKED, "account not authorized",
                  lambda f: f.account is not None and not f.account_ok),
    _enqueue_rule("profile not allowed", codes.RUNNER_PROFILE_FORBIDDEN, "profile not allowed",
                  lambda f: f.profile is not None and (f.effective is None or f.profile not in f.effective)),
    _enqueue_rule("runner offline", codes.RUNNER_OFFLINE, "runner offline", lambda f: not f.online),
    # runner_command_not_admitted's second status: 403 at enqueue, 409 for a closed channel's command
    _enqueue_rule("channel not valid", codes.RUNNER_COMMAND_NOT_ADMITTED, "channel not valid",
                  lambda f: f.channel_refusal is not None, status=403),
    _enqueue_rule("too many pending commands", codes.RUNNER_BUSY, "runner busy",
                  lambda f: f.pending >= f.pending_limit),
    _enqueue_rule("command too large", codes.RUNNER_PAYLOAD_LIMIT, "command too large",
                  lambda f: f.size > f.single_limit),
    _enqueue_rule("queue bytes full", codes.RUNNER_BUSY, "runner busy",
                  lambda f: f.queued_bytes + f.size > f.queued_limit),
)


def enqueue_refusal(facts: EnqueueFacts) -> EnqueueRule | None:
    for rule in ENQUEUE_RULES:
        if rule.refuses(facts):
            return rule
    return None
