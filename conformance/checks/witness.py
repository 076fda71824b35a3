"""Witnesses: the few facts that prove a violation, and the proof that they are few.

Rules:
- A witness is a sub-history: ``proves`` (the invariant reports a violation on the witness alone).
- It is minimal: removing any one fact makes the invariant silent (``is_minimal``), as Elle's
  cycles are — not the whole history, not even one fact too many.
- ``minimise`` shrinks any proving set to such a witness by deleting facts one at a time (the
  checkers already return minimal witnesses; this is for callers holding a bigger set).
"""

from __future__ import annotations

from collections.abc import Sequence

from .facts import Fact
from .invariants import BY_ID, Invariant, Violation


def _inv(invariant: Invariant | str) -> Invariant:
    return BY_ID[invariant] if isinstance(invariant, str) else invariant


def proves(invariant: Invariant | str, facts: Sequence[Fact]) -> bool:
    """True when the invariant reports a violation on ``facts`` alone."""
    return _inv(invariant)(facts) is not None


def is_minimal(violation: Violation) -> bool:
    """The witness proves the violation and no fact of it can be left out."""
    inv = BY_ID[violation.invariant_id]
    w = list(violation.witness)
    if not proves(inv, w):
        return False
    return all(not proves(inv, w[:i] + w[i + 1:]) for i in range(len(w)))


def minimise(invariant: Invariant | str, facts: Sequence[Fact]) -> list[Fact]:
    """A minimal proving subset of ``facts`` (``facts`` must prove the violation)."""
    inv = _inv(invariant)
    kept = sorted(facts, key=lambda f: f.seq)
    if not proves(inv, kept):
        raise ValueError(f"{inv.id}: these facts prove no violation")
    i = 0
    while i < len(kept):
        trial = kept[:i] + kept[i + 1:]
        if proves(inv, trial):
            kept = trial
        else:
            i += 1
    return kept
