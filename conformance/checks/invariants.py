"""The invariants of a recorded run, as data: rows of (id, one sentence, checker).

The rows live beside their checkers, one module a concern: ``authority_invariants`` (INV-2 admit
before effect, INV-3 no effect after a revocation, INV-9 profiles), ``ledger_invariants`` (INV-1
once per id, INV-6 receipts, INV-7 no rerun after a restart, INV-10 fingerprints),
``channel_invariants`` (INV-4 session ownership, INV-8 closed stays closed) and
``epoch_invariants`` (INV-5 stale epochs and fenced instances, INV-11 result epochs); what a
proof is and the joins proofs use are in ``proof``. This module is the table that runs.

Rules:
- A checker reads facts (``facts.Fact``) only and returns the first violation it can *prove*
  (lowest seq of its last witness fact) or None. A proof uses determinate facts only; an
  indeterminate fact is never counted as having happened, and where the proof needs an absence
  ("no granted admit before the effect") an indeterminate candidate defeats it.
- A witness is a sub-history: the checker run on the witness alone reports the same invariant,
  and on the witness minus any one fact does not (``witness.is_minimal``). Absences therefore
  need an anchor that names the command (its delivery or admit), so that the effect alone is
  never a proof.
- Effects count when they execute a command (kind ``effect`` joined to a ``command_id``);
  unjoined effects are reported apart (``Report.unjoined``), never guessed.
- Scope: one runner per history; "same epoch" means no ``epoch`` fact in between.
- "After" a revocation, a close or an epoch change is judged by the effect's seq; a request the
  harness held at a Hermes pause point before it (a ``held`` fact) was already inside Hermes, so
  its late effect is not counted against the runner (invariants 2, 3 and 8). Stop methods
  (``STOP_METHODS``) may run after a revocation, never after a disable.
- ``INVARIANTS`` is every module's rows in id order; each id stands once.
"""

from __future__ import annotations

from collections.abc import Sequence

from . import authority_invariants, channel_invariants, epoch_invariants, ledger_invariants
from .authority_invariants import (
    RUNNER_WIDE,
    STOP_METHODS,
    admit_before,
    no_effect_after_revoke,
    profiles_intersection,
)
from .channel_invariants import OWNING_METHODS, closed_stays_closed, event_on_owner
from .epoch_invariants import no_stale_accept, result_epoch
from .facts import Fact
from .ledger_invariants import (
    CONFLICT,
    STARTED_POINTS,
    UNCERTAIN,
    UNSTORED_POINTS,
    fingerprint_conflict,
    one_effect,
    same_receipt,
    started_not_rerun,
)
from .proof import Cand, Checker, Found, Invariant, Report, Violation

__all__ = [
    "BY_ID", "CONFLICT", "INVARIANTS", "OWNING_METHODS", "RUNNER_WIDE", "STARTED_POINTS",
    "STOP_METHODS", "UNCERTAIN", "UNSTORED_POINTS", "Cand", "Checker", "Found", "Invariant",
    "Report", "Violation", "admit_before", "check", "closed_stays_closed", "event_on_owner",
    "fingerprint_conflict", "no_effect_after_revoke", "no_stale_accept", "one_effect",
    "profiles_intersection", "result_epoch", "same_receipt", "started_not_rerun",
]

INVARIANTS: tuple[Invariant, ...] = tuple(sorted(
    (*authority_invariants.ROWS, *ledger_invariants.ROWS, *channel_invariants.ROWS,
     *epoch_invariants.ROWS),
    key=lambda inv: int(inv.id.removeprefix("INV-"))))
BY_ID = {inv.id: inv for inv in INVARIANTS}
assert len(BY_ID) == len(INVARIANTS), "an invariant id stands twice"


def check(facts: Sequence[Fact], invariants: Sequence[Invariant] = INVARIANTS) -> Report:
    """Every invariant over ``facts``; unjoined effects listed apart."""
    report = Report(unjoined=[f for f in facts if f.kind == "effect" and f.command_id is None])
    for inv in invariants:
        v = inv(facts)
        if v is not None:
            report.violations.append(v)
    return report
