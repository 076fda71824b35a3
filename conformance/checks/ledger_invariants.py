"""The invariants of the runner's ledger: once per command id, receipts kept, no rerun after a
restart, one payload per id (INV-1, INV-6, INV-7, INV-10), as rows of ``(id, sentence, checker)``.

Rules:
- INV-1: two determinate effects joined to one command id, anchored by the command's delivery
  (or admit), are a double execution.
- INV-6: a redelivery with the same fingerprint is answered with the body of the first answer
  (a result whose fingerprint the translator could not tell is not judged);
  a first answer of ``runner_command_uncertain`` proves nothing, and an ``uncertain`` answer
  after the row was retired (a ``retire`` fact in between) is allowed.
- INV-7: a kill at one of ``STARTED_POINTS`` (or after an admit by the killed instance) means
  the ``started`` row was written: an effect of that command after the kill, by another
  instance or after a new start, is a rerun. A kill at one of ``UNSTORED_POINTS`` left no
  stored reply: another instance must answer ``runner_command_uncertain``.
- INV-10: the row keeps the fingerprint of the first delivery the runner answered; a result for
  the same id with another fingerprint is ``idempotency_conflict`` (unless the row was retired
  in between).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from .facts import UNKNOWN_FP, Fact
from .proof import Cand, Found, Invariant, by_command, effects, first, uniq

UNCERTAIN = "runner_command_uncertain"
CONFLICT = "idempotency_conflict"
#: kill points (``kill.reason``) at which the runner had written the ``started`` row of the
#: command named by the kill fact.
STARTED_POINTS = frozenset({
    "after_started", "admit_held", "after_admit", "during_hermes", "after_hermes_replied",
    "before_result_post", "result_held", "after_result_post",
})
#: kill points at which no reply can be stored yet: the redelivery must get runner_command_uncertain.
UNSTORED_POINTS = frozenset({"after_started", "admit_held", "during_hermes"})


# -- 1 ------------------------------------------------------------------------------------------
def one_effect(facts: Sequence[Fact]) -> Found:
    delivered = by_command(facts, "deliver")
    admitted = by_command(facts, "admit")
    seen: dict[str, Fact] = {}
    for e in effects(facts):
        cid = e.command_id
        assert cid is not None
        anchors = delivered.get(cid) or admitted.get(cid)
        if not anchors:
            continue
        anchor = anchors[0]
        if cid in seen:
            return (anchor, seen[cid], e), f"command {cid} executed twice in Hermes"
        seen[cid] = e
    return None


# -- 6 ------------------------------------------------------------------------------------------
def same_receipt(facts: Sequence[Fact]) -> Found:
    retires = [f.seq for f in facts if f.kind == "retire"]
    cands: list[Cand] = []
    for rs in by_command(facts, "result").values():
        # a result whose fingerprint is unknown (it may answer either of two payloads of its
        # id, see translate) is not judged here
        rs = [r for r in rs if r.determinate and r.body is not None and r.fingerprint != UNKNOWN_FP]
        for i, answered in enumerate(rs):
            if answered.code == UNCERTAIN:
                continue
            for later in rs[i + 1:]:
                if later.fingerprint != answered.fingerprint or later.body == answered.body:
                    continue
                if later.code == UNCERTAIN and any(answered.seq < s < later.seq for s in retires):
                    continue
                cands.append((later.seq, (answered, later), "the redelivery got another answer"))
    return first(cands)


# -- 7 ------------------------------------------------------------------------------------------
def _started_evidence(admits: dict[tuple[str, str | None], list[Fact]], cid: str,
                      kill: Fact) -> Fact | None:
    """What proves the killed instance had written the ``started`` row of ``cid``."""
    if kill.command_id == cid and kill.reason in STARTED_POINTS:
        return kill
    return next((a for a in admits.get((cid, kill.instance), []) if a.seq < kill.seq), None)


def started_not_rerun(facts: Sequence[Fact]) -> Found:
    kills = [f for f in facts if f.kind == "kill" and f.instance and f.determinate]
    if not kills:
        return None
    starts = [f for f in facts if f.kind == "start"]
    admits: dict[tuple[str, str | None], list[Fact]] = defaultdict(list)
    admitted_by: dict[str, set[str | None]] = defaultdict(set)
    for f in facts:
        if f.kind == "admit" and f.command_id is not None:
            admits[(f.command_id, f.instance)].append(f)
            admitted_by[f.command_id].add(f.instance)
    cands: list[Cand] = []
    for cid, effs in by_command(effects(facts), "effect").items():
        for k in kills:
            if k.command_id != cid and k.instance not in admitted_by[cid]:
                continue
            ev = _started_evidence(admits, cid, k)
            if ev is None:
                continue
            for e in effs:
                if e.seq < k.seq:
                    continue
                if e.instance is not None:
                    if e.instance != k.instance:
                        cands.append((e.seq, uniq(ev, k, e), "executed again after the restart"))
                        break
                else:
                    st = [s for s in starts if k.seq < s.seq < e.seq]
                    if st:
                        cands.append((e.seq, uniq(ev, k, st[0], e),
                                      "executed again after the restart"))
                        break
    results = by_command(facts, "result")
    for k in kills:
        if k.command_id is None or k.reason not in UNSTORED_POINTS:
            continue
        for r in results.get(k.command_id, []):
            if r.seq > k.seq and r.determinate and r.instance != k.instance and r.code != UNCERTAIN:
                cands.append((r.seq, (k, r), f"answered {r.code or 'a result'}, not {UNCERTAIN}"))
                break
    return first(cands)


# -- 10 -----------------------------------------------------------------------------------------
def fingerprint_conflict(facts: Sequence[Fact]) -> Found:
    """The row keeps the fingerprint of the first delivery the runner answered; a result for the
    same id with another fingerprint must be idempotency_conflict (never the stored reply)."""
    retires = [f.seq for f in facts if f.kind == "retire"]
    cands: list[Cand] = []
    for rs in by_command(facts, "result").values():
        rs = [r for r in rs if r.determinate and r.fingerprint not in (None, UNKNOWN_FP)]
        kept = next((r for r in rs if r.code != CONFLICT), None)
        if kept is None:
            continue
        for later in rs:
            if later.seq <= kept.seq or later.fingerprint == kept.fingerprint:
                continue
            if later.code == CONFLICT or any(kept.seq < s < later.seq for s in retires):
                continue
            cands.append((later.seq, (kept, later),
                          f"another payload under {later.command_id} answered "
                          f"{later.code or 'a result'}, not {CONFLICT}"))
            break
    return first(cands)


ROWS: tuple[Invariant, ...] = (
    Invariant("INV-1", "at most one Hermes effect per command id", one_effect),
    Invariant("INV-6", "every completed receipt survives: a redelivery is answered with the "
              "same result", same_receipt),
    Invariant("INV-7", "a started command is never executed again after a restart; an unstored "
              "one is answered runner_command_uncertain", started_not_rerun),
    Invariant("INV-10", "a command id delivered again with another payload is answered "
              "idempotency_conflict, never from the ledger", fingerprint_conflict),
)
