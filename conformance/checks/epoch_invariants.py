"""The invariants of epochs and instances: nothing accepted from a stale epoch or a fenced
instance, and results posted under their delivery's epoch (INV-5, INV-11), as rows of
``(id, sentence, checker)``.

Rules:
- Scope: one runner per history; "same epoch" means no ``epoch`` fact in between.
- INV-5: a result, event or tool call the server accepted from an instance after a ``fence`` of
  that instance, or under an epoch other than the newest ``epoch`` fact, is a violation.
- INV-11: a result is posted under the epoch of a delivery of its command to the posting
  instance. An admit or result (its id unread when the gate refused it) under an epoch other
  than the newest its instance was given by a poll answer, while no command delivered to it
  under that epoch awaits a result, can only come from a runner that kept an older epoch header.
  Poll facts are ordered by when their answer went out (``at_out``), the others by ``seq``.
  A ``carried`` fact (a delivery before the example began, not yet answered by its instance)
  counts as a delivery: a slow runner may answer it inside the example, under its epoch.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from .facts import Fact
from .proof import Cand, Found, Invariant, first


# -- 5 ------------------------------------------------------------------------------------------
def no_stale_accept(facts: Sequence[Fact]) -> Found:
    cands: list[Cand] = []
    current: Fact | None = None
    fenced: dict[str, Fact] = {}
    for f in facts:
        if f.kind == "epoch" and f.determinate:
            current = f
        elif f.kind == "fence" and f.determinate and f.instance:
            fenced.setdefault(f.instance, f)
        elif f.kind in ("result", "event", "tool") and f.outcome == "accepted" and f.determinate:
            if f.instance in fenced:
                fc = fenced[f.instance]
                cands.append((f.seq, (fc, f), f"instance {f.instance} was fenced at #{fc.seq}"))
            elif current is not None and f.epoch != current.epoch:
                cands.append((f.seq, (current, f), f"epoch {f.epoch} is not the current {current.epoch}"))
    return first(cands)


# -- 11 -----------------------------------------------------------------------------------------
def result_epoch(facts: Sequence[Fact]) -> Found:
    """A result is posted under the epoch of a delivery of its command to the posting instance;
    an admit or result (its id unread when the gate refused it) under an epoch other than the
    newest its instance was given, while no command delivered to it under that epoch awaits a
    result, can only come from a runner that kept an older epoch header."""
    delivered: dict[tuple[str, str | None], list[Fact]] = defaultdict(list)
    by_epoch: dict[tuple[str | None, str], list[Fact]] = defaultdict(list)
    answered: dict[tuple[str, str | None], list[int]] = defaultdict(list)
    given: dict[str, Fact] = {}  # instance → the newest poll answer it got (it gave an epoch)
    cands: list[Cand] = []
    order = sorted(facts, key=lambda x: x.at_out if x.kind == "poll" else x.seq)
    for f in order:
        if f.indeterminate:
            continue
        if f.kind == "poll" and f.instance and f.reason:
            given[f.instance] = f
            continue
        if f.kind in ("deliver", "carried") and f.epoch and f.command_id:
            delivered[(f.command_id, f.instance)].append(f)
            by_epoch[(f.instance, f.epoch)].append(f)
            continue
        if f.kind not in ("admit", "result") or not f.epoch or not f.instance:
            continue
        if f.kind == "result" and f.command_id:
            ds = [d for d in delivered.get((f.command_id, f.instance), []) if d.at_out < f.seq]
            if ds and f.epoch not in {d.epoch for d in ds}:
                d = ds[-1]
                cands.append((f.seq, (d, f), f"delivered under {d.epoch}, posted under {f.epoch}"))
        g = given.get(f.instance)
        if g is not None and g.reason != f.epoch and g.at_out < f.seq:
            pending = [d for d in by_epoch.get((f.instance, f.epoch), []) if d.at_out < f.seq
                       and not any(d.at_out < s < f.seq
                                   for s in answered.get((d.command_id or "", f.instance), []))]
            if not pending:
                cands.append((f.seq, (g, f), f"given {g.reason}, sent an {f.kind} under "
                               f"{f.epoch} with no command of that epoch open"))
        if f.kind == "result" and f.command_id:
            answered[(f.command_id, f.instance)].append(f.seq)
    return first(cands)


ROWS: tuple[Invariant, ...] = (
    Invariant("INV-5", "no result, event or tool call accepted under a stale epoch or from a "
              "fenced instance", no_stale_accept),
    Invariant("INV-11", "a result is posted under the epoch its command was delivered in, never "
              "under a stale one",
              result_epoch),
)
