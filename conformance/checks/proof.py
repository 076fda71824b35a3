"""What a proof of a violation is, and the joins every checker's proof is built from (sans-IO).

Rules:
- A checker (``Checker``) reads sorted facts and returns ``Found``: the witness facts and a note,
  or None. Where several violations are provable, the one whose last witness fact has the lowest
  seq is reported (``first`` over ``Cand`` rows of ``(seq, witness, note)``).
- Only determinate facts count as having happened: ``effects`` keeps determinate effects joined
  to a command; ``epochs_between`` keeps determinate epoch changes.
- A harness ``held`` fact (``held_before``) says a request was already inside Hermes at a pause
  point before a given seq: the checkers that judge "after" a revocation, a close or an epoch
  change do not count its late effect against the runner.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from .facts import Fact

Found = tuple[tuple[Fact, ...], str] | None
Cand = tuple[int, tuple[Fact, ...], str]
Checker = Callable[[Sequence[Fact]], Found]


@dataclass(frozen=True)
class Violation:
    invariant_id: str
    sentence: str
    witness: tuple[Fact, ...]
    note: str = ""

    @property
    def seqs(self) -> list[int]:
        return [f.seq for f in self.witness]


@dataclass(frozen=True)
class Invariant:
    id: str
    sentence: str
    checker: Checker

    def __call__(self, facts: Sequence[Fact]) -> Violation | None:
        found = self.checker(sorted(facts, key=lambda f: f.seq))
        if found is None:
            return None
        witness, note = found
        return Violation(self.id, self.sentence, tuple(sorted(witness, key=lambda f: f.seq)), note)


@dataclass
class Report:
    violations: list[Violation] = field(default_factory=list)
    unjoined: list[Fact] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.violations


def by_command(facts: Iterable[Fact], kind: str) -> dict[str, list[Fact]]:
    out: dict[str, list[Fact]] = defaultdict(list)
    for f in facts:
        if f.kind == kind and f.command_id is not None:
            out[f.command_id].append(f)
    return out


def effects(facts: Iterable[Fact]) -> list[Fact]:
    return [f for f in facts if f.kind == "effect" and f.command_id is not None and f.determinate]


def epochs_between(facts: Sequence[Fact], lo: int, hi: int) -> list[Fact]:
    """Epoch facts strictly between ``lo`` and ``hi`` (``facts`` sorted by seq)."""
    start = bisect_right(facts, lo, key=lambda f: f.seq)
    stop = bisect_left(facts, hi, key=lambda f: f.seq)
    return [f for f in facts[start:stop] if f.kind == "epoch" and f.determinate]


def uniq(*facts: Fact) -> tuple[Fact, ...]:
    return tuple(dict.fromkeys(facts))


def first(cands: Iterable[Cand]) -> Found:
    best = min(cands, key=lambda c: c[0], default=None)
    return None if best is None else (best[1], best[2])


def held_before(held: Sequence[Fact], e: Fact, seq: int) -> bool:
    """A harness ``held`` fact says the request of ``e`` was already inside Hermes before ``seq``."""
    return any(h.seq < seq and ((h.command_id is not None and h.command_id == e.command_id)
                                or (h.session_id is not None and h.session_id == e.session_id))
               for h in held)
