"""The command ledger's decisions (protocol 1 §4), sans-IO.

Everything that decides what happens to a delivered command lives here; this module does no
I/O and does not know about SQLite, HTTP or Hermes. :mod:`runner_ref.ledger_store` persists
rows; :mod:`runner_ref.poll_loop` performs the actions this module returns.

Theory of operation. A command id has a *row* (``None`` before the first delivery) in one of
three states, and may be *in flight* in this process:

    None ──start──▶ started ──complete──▶ complete ──retire (≥1 h old)──▶ retired

- ``started`` is written durably *before* admission, so a crash after it can never lead to a
  second execution: on redelivery a ``started`` row (no live flight) is *uncertain*.
- ``complete`` stores the reply (a result or a coded error, admission refusals included) and
  answers every later delivery without touching Hermes.
- ``retired`` is a complete row older than 1 h with its reply dropped; it is uncertain too.

A delivery is decided by :data:`DELIVERY_RULES`, checked in order (first match wins):
1. a row or flight with another fingerprint → CONFLICT (409 ``idempotency_conflict``)
2. the same id in flight                   → JOIN (share the first delivery's outcome)
3. the row is ``complete``                 → REPLAY (the stored reply)
4. the row is ``started`` or ``retired``   → UNCERTAIN (409 ``runner_command_uncertain``)
5. no row                                  → START
After START the runner checks the deadline, admits, checks the deadline again
(:data:`ADMISSION_GATES`); any failure completes the row with 403 ``runner_command_not_admitted``.
The deadline rule (``now < expiresAt``) and the admit rule are also the control plane's: they are
written independently in fake_server on purpose.

The tables are what runs: :mod:`runner_ref.ledger_store` builds its SQL guards from
:data:`TRANSITIONS` (:func:`source_state` / :func:`target_state`), :func:`decide` applies
:data:`DELIVERY_RULES`, and the poll loop iterates :data:`ADMISSION_GATES`.
"""
from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from . import codes
from .codes import error_result


class State(enum.Enum):
    STARTED = "started"
    COMPLETE = "complete"
    RETIRED = "retired"


class Event(enum.Enum):
    START = "start"
    COMPLETE = "complete"
    RETIRE = "retire"


class DeliveryDecision(enum.Enum):
    CONFLICT = "conflict"
    JOIN = "join"
    REPLAY = "replay"
    UNCERTAIN = "uncertain"
    START = "start"


class LedgerError(Exception):
    """A transition the ledger forbids (a bug in the caller, never a protocol answer)."""


#: TRANSITIONS[state][event] -> new state. ``None`` is "no row yet". Anything absent is an error.
TRANSITIONS: dict[State | None, dict[Event, State]] = {
    None: {Event.START: State.STARTED},
    State.STARTED: {Event.COMPLETE: State.COMPLETE},
    State.COMPLETE: {Event.RETIRE: State.RETIRED},
    State.RETIRED: {},
}


@dataclass(frozen=True)
class Row:
    id: str
    fingerprint: str
    state: State
    result: str | None   # JSON text of {"result":…} or {"error":{…}}; None unless complete
    created: int         # ms since the epoch


def source_state(event: Event) -> State | None:
    """The one state ``event`` leaves (``None``: no row yet). The store's SQL guards are built
    from this, so the table is what the database enforces."""
    sources = [state for state, moves in TRANSITIONS.items() if event in moves]
    if len(sources) != 1:
        raise LedgerError(f"{event.value} must leave exactly one state, leaves {len(sources)}")
    return sources[0]


def target_state(event: Event) -> State:
    """The state ``event`` leads to (from :func:`source_state`)."""
    return TRANSITIONS[source_state(event)][event]


def transition(state: State | None, event: Event) -> State:
    """Apply one event; raises :class:`LedgerError` for a transition that has no entry."""
    try:
        return TRANSITIONS[state][event]
    except KeyError:
        name = state.value if state else "absent"
        raise LedgerError(f"no transition from {name} on {event.value}") from None


_RuleTest = Callable[[Row | None, str | None, str], bool]

#: DELIVERY_RULES: (test(row, in_flight_fingerprint, fingerprint), decision), in order.
DELIVERY_RULES: tuple[tuple[_RuleTest, DeliveryDecision], ...] = (
    (lambda row, fl, fp: (row is not None and row.fingerprint != fp)
     or (fl is not None and fl != fp), DeliveryDecision.CONFLICT),
    (lambda row, fl, fp: fl is not None, DeliveryDecision.JOIN),
    (lambda row, fl, fp: row is not None and row.state is State.COMPLETE, DeliveryDecision.REPLAY),
    (lambda row, fl, fp: row is not None and row.state in (State.STARTED, State.RETIRED),
     DeliveryDecision.UNCERTAIN),
    (lambda row, fl, fp: row is None, DeliveryDecision.START),
)


def decide(row: Row | None, in_flight: str | None, fingerprint: str) -> DeliveryDecision:
    """What to do with a delivery, given the stored row and the fingerprint of a live flight."""
    for test, decision in DELIVERY_RULES:
        if test(row, in_flight, fingerprint):
            return decision
    raise LedgerError("no delivery rule matched")  # unreachable: the rules are exhaustive


class Gate(enum.Enum):
    DEADLINE = "deadline"   # :func:`deadline_ok` on ``expiresAt`` and the wall clock
    ADMIT = "admit"         # the control plane's ``admit`` answers ``{"allowed": true}``


#: ADMISSION_GATES, in order: before admit the deadline must not have passed, admit must say
#: allowed, and after admit the deadline is checked again. Each failure is the same refusal.
#: :class:`runner_ref.poll_loop.PollLoop` iterates this tuple (one check per :class:`Gate`).
ADMISSION_GATES: tuple[Gate, ...] = (Gate.DEADLINE, Gate.ADMIT, Gate.DEADLINE)
NOT_ADMITTED: dict[str, Any] = error_result(codes.COMMAND_NOT_ADMITTED)
CONFLICT: dict[str, Any] = error_result(codes.IDEMPOTENCY_CONFLICT)
UNCERTAIN: dict[str, Any] = error_result(codes.COMMAND_UNCERTAIN)


def deadline_ok(expires_at: Any, now_ms: int) -> bool:
    """A command may run only while ``now < expiresAt`` (a missing or bad deadline fails)."""
    return isinstance(expires_at, int | float) and not isinstance(expires_at, bool) \
        and now_ms < expires_at


def retire_due(row: Row, now_ms: int, retire_after_ms: int) -> bool:
    """A complete row older than the retirement age is retired (its reply dropped).
    ``ledger_store.SQL_RETIRE`` is the same rule in SQL (a test checks they agree)."""
    return row.state is source_state(Event.RETIRE) and row.created < now_ms - retire_after_ms


class RetireCounter:
    """Retirement runs at start-up and after every ``every``-th command."""

    def __init__(self, every: int) -> None:
        self.every = every
        self.count = 0

    def tick(self) -> bool:
        self.count += 1
        if self.count >= self.every:
            self.count = 0
            return True
        return False
