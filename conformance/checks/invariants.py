"""The invariants of a recorded run, as data: rows of (id, one sentence, checker).

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
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from .facts import Fact

UNCERTAIN = "runner_command_uncertain"
#: gateway.rpc methods exempt from the channel validity check (stop methods, protocol §3).
STOP_METHODS = frozenset({"session.interrupt", "session.close", "session.active_list"})
#: gateway.rpc methods whose result makes the channel own the session in it.
OWNING_METHODS = frozenset({"session.create", "session.resume"})
#: kill points (``kill.reason``) at which the runner had written the ``started`` row of the
#: command named by the kill fact.
STARTED_POINTS = frozenset({
    "after_started", "admit_held", "after_admit", "during_hermes", "after_hermes_replied",
    "before_result_post", "result_held", "after_result_post",
})
#: kill points at which no reply can be stored yet: the redelivery must get runner_command_uncertain.
UNSTORED_POINTS = frozenset({"after_started", "admit_held", "during_hermes"})
#: revocations that cover every channel and lease of the runner.
RUNNER_WIDE = frozenset({"account_authorization", "account_active", "profiles", "runner_disabled"})


@dataclass(frozen=True)
class Violation:
    invariant_id: str
    sentence: str
    witness: tuple[Fact, ...]
    note: str = ""

    @property
    def seqs(self) -> list[int]:
        return [f.seq for f in self.witness]


Checker = Callable[[Sequence[Fact]], "tuple[tuple[Fact, ...], str] | None"]


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


Found = tuple[tuple[Fact, ...], str] | None
Cand = tuple[int, tuple[Fact, ...], str]


# -- helpers ------------------------------------------------------------------------------------
def _by_command(facts: Iterable[Fact], kind: str) -> dict[str, list[Fact]]:
    out: dict[str, list[Fact]] = defaultdict(list)
    for f in facts:
        if f.kind == kind and f.command_id is not None:
            out[f.command_id].append(f)
    return out


def _effects(facts: Iterable[Fact]) -> list[Fact]:
    return [f for f in facts if f.kind == "effect" and f.command_id is not None and f.determinate]


def _epochs_between(facts: Sequence[Fact], lo: int, hi: int) -> list[Fact]:
    """Epoch facts strictly between ``lo`` and ``hi`` (``facts`` sorted by seq)."""
    start = bisect_right(facts, lo, key=lambda f: f.seq)
    stop = bisect_left(facts, hi, key=lambda f: f.seq)
    return [f for f in facts[start:stop] if f.kind == "epoch" and f.determinate]


def _uniq(*facts: Fact) -> tuple[Fact, ...]:
    return tuple(dict.fromkeys(facts))


def _first(cands: Iterable[tuple[int, tuple[Fact, ...], str]]) -> Found:
    best = min(cands, key=lambda c: c[0], default=None)
    return None if best is None else (best[1], best[2])


def _held_before(held: Sequence[Fact], e: Fact, seq: int) -> bool:
    """A harness ``held`` fact says the request of ``e`` was already inside Hermes before ``seq``."""
    return any(h.seq < seq and ((h.command_id is not None and h.command_id == e.command_id)
                                or (h.session_id is not None and h.session_id == e.session_id))
               for h in held)


# -- 1 ------------------------------------------------------------------------------------------
def one_effect(facts: Sequence[Fact]) -> Found:
    delivered = _by_command(facts, "deliver")
    admitted = _by_command(facts, "admit")
    seen: dict[str, Fact] = {}
    for e in _effects(facts):
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


# -- 2 ------------------------------------------------------------------------------------------
def admit_before(facts: Sequence[Fact]) -> Found:
    delivered = _by_command(facts, "deliver")
    admits = _by_command(facts, "admit")
    held = [f for f in facts if f.kind == "held"]

    def same_epoch(a: Fact, e: Fact) -> bool:
        eps = _epochs_between(facts, a.at_out, e.seq)
        return not eps or _held_before([h for h in held if h.seq > a.at_out], e, eps[0].seq)

    cands: list[Cand] = []
    for e in _effects(facts):
        cid = e.command_id
        assert cid is not None
        mine = admits.get(cid, [])
        ok = [a for a in mine if a.at_out < e.seq and (a.indeterminate or a.outcome == "granted")
              and same_epoch(a, e)]
        if ok:
            continue
        granted = [a for a in mine if a.determinate and a.outcome == "granted"]
        before = [a for a in granted if a.at_out < e.seq]
        if before:
            a = before[-1]
            ep = _epochs_between(facts, a.at_out, e.seq)[0]
            cands.append((e.seq, (a, ep, e), f"admit #{a.seq} was granted in an older epoch"))
        elif granted:
            cands.append((e.seq, (granted[0], e), f"admit #{granted[0].seq} was granted after the effect"))
        elif any(a.determinate for a in mine):
            a = next(a for a in mine if a.determinate)
            cands.append((e.seq, (a, e), f"admit #{a.seq} was not granted"))
        elif not mine and delivered.get(cid):
            d = [d for d in delivered[cid] if d.seq < e.seq] or delivered[cid]
            cands.append((e.seq, (d[-1], e), "the runner never asked to admit it"))
    return _first(cands)


# -- 3 ------------------------------------------------------------------------------------------
def _covers(r: Fact, e: Fact) -> bool:
    if r.kind == "disable":
        return True
    if e.method in STOP_METHODS:
        return False  # stop methods run on a revoked channel (protocol §2.6, upstream test #24)
    if r.reason == "profiles":  # a profile change revokes what it no longer allows
        return (r.profiles is not None and e.profile is not None and e.profile not in r.profiles
                and (r.account is None or r.account == e.account))
    if r.reason in RUNNER_WIDE and not r.connection_id and not r.lease_id:
        return r.account is None or r.account == e.account  # an account's: its commands only
    if r.connection_id is not None and r.connection_id == e.connection_id:
        return True
    return r.lease_id is not None and r.lease_id == e.lease_id


def no_effect_after_revoke(facts: Sequence[Fact]) -> Found:
    admits = _by_command(facts, "admit")
    revokes = [f for f in facts if f.kind in ("revoke", "disable") and f.determinate]
    held = [f for f in facts if f.kind == "held"]
    cands: list[Cand] = []
    for e in _effects(facts):
        granted = [a for a in admits.get(e.command_id or "", [])
                   if a.determinate and a.outcome == "granted" and a.at_out < e.seq]
        if not granted:
            continue  # invariant 2's business
        a = granted[-1]
        for r in revokes:
            if a.at_out < r.seq < e.seq and _covers(r, e) and not _held_before(held, e, r.seq):
                cands.append((e.seq, (a, r, e), f"{r.kind} #{r.seq} came between admit and effect"))
                break
    return _first(cands)


# -- 4 ------------------------------------------------------------------------------------------
def _owners(facts: Sequence[Fact]) -> list[Fact]:
    return [f for f in facts if f.kind == "result" and f.determinate and f.method in OWNING_METHODS
            and f.code is None and f.session_id and f.connection_id]


def event_on_owner(facts: Sequence[Fact]) -> Found:
    owners = _owners(facts)
    cands: list[Cand] = []
    for ev in facts:
        if ev.kind != "event" or ev.indeterminate or not ev.session_id or not ev.connection_id:
            continue
        before = [o for o in owners if o.session_id == ev.session_id and o.seq < ev.seq]
        if not before or any(o.connection_id == ev.connection_id for o in before):
            continue
        o = before[-1]
        cands.append((ev.seq, (o, ev), f"session {ev.session_id} is owned by {o.connection_id}"))
    return _first(cands)


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
    return _first(cands)


# -- 6 ------------------------------------------------------------------------------------------
def same_receipt(facts: Sequence[Fact]) -> Found:
    retires = [f.seq for f in facts if f.kind == "retire"]
    cands: list[Cand] = []
    for rs in _by_command(facts, "result").values():
        rs = [r for r in rs if r.determinate and r.body is not None]
        for i, first in enumerate(rs):
            if first.code == UNCERTAIN:
                continue
            for later in rs[i + 1:]:
                if later.fingerprint != first.fingerprint or later.body == first.body:
                    continue
                if later.code == UNCERTAIN and any(first.seq < s < later.seq for s in retires):
                    continue
                cands.append((later.seq, (first, later), "the redelivery got another answer"))
    return _first(cands)


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
    for cid, effs in _by_command(_effects(facts), "effect").items():
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
                        cands.append((e.seq, _uniq(ev, k, e), "executed again after the restart"))
                        break
                else:
                    st = [s for s in starts if k.seq < s.seq < e.seq]
                    if st:
                        cands.append((e.seq, _uniq(ev, k, st[0], e),
                                      "executed again after the restart"))
                        break
    results = _by_command(facts, "result")
    for k in kills:
        if k.command_id is None or k.reason not in UNSTORED_POINTS:
            continue
        for r in results.get(k.command_id, []):
            if r.seq > k.seq and r.determinate and r.instance != k.instance and r.code != UNCERTAIN:
                cands.append((r.seq, (k, r), f"answered {r.code or 'a result'}, not {UNCERTAIN}"))
                break
    return _first(cands)


# -- 8 ------------------------------------------------------------------------------------------
def closed_stays_closed(facts: Sequence[Fact]) -> Found:
    closes = [f for f in facts if f.kind == "close" and f.determinate]
    held = [f for f in facts if f.kind == "held"]
    cands: list[Cand] = []
    for f in facts:
        if f.indeterminate or f.kind not in ("effect", "event", "tool"):
            continue
        if f.kind == "effect" and f.command_id is None:
            continue
        if f.kind == "event" and f.op == "closed":
            continue
        for c in closes:
            if c.seq >= f.seq or (f.kind == "effect" and _held_before(held, f, c.seq)):
                continue
            if (c.connection_id and c.connection_id == f.connection_id) or (
                    c.lease_id and c.lease_id == f.lease_id):
                cands.append((f.seq, (c, f), f"{f.kind} on a closed "
                               f"{'channel' if c.connection_id else 'lease'}"))
                break
    cands += _ended_by_epoch(facts)
    return _first(cands)


def _ended_by_epoch(facts: Sequence[Fact]) -> list[Cand]:
    """A new epoch ends every channel and lease of the older ones (protocol §2.4): an event or
    tool call the runner posts for one *under the new epoch* proves it kept it alive."""
    born: dict[tuple[str, str], Fact] = {}
    epochs: dict[str, Fact] = {}
    cands: list[Cand] = []
    for f in facts:
        if f.indeterminate:
            continue
        if f.kind == "epoch" and f.epoch:
            epochs.setdefault(f.epoch, f)
        elif f.kind == "deliver" and f.epoch:
            for key in (("channel", f.connection_id), ("lease", f.lease_id)):
                if key[1] and key not in born:
                    born[(key[0], key[1])] = f
        elif f.kind in ("event", "tool") and f.epoch and not (f.kind == "event" and f.op == "closed"):
            key = ("channel", f.connection_id) if f.kind == "event" else ("lease", f.lease_id)
            d = born.get((key[0], key[1] or ""))
            ep = epochs.get(f.epoch)
            if d is not None and ep is not None and d.epoch != f.epoch and d.seq < ep.seq < f.seq:
                cands.append((f.seq, (d, ep, f), f"{f.kind} on a {key[0]} of epoch {d.epoch} "
                               f"under the newer epoch {f.epoch}"))
    return cands


# -- 9 ------------------------------------------------------------------------------------------
def _latest(sets: list[Fact], scope: str, account: str | None, seq: int) -> Fact | None:
    found = [p for p in sets if p.reason == scope and p.seq < seq
             and (scope != "account" or p.account == account)]
    return found[-1] if found else None


def profiles_intersection(facts: Sequence[Fact]) -> Found:
    """An effect's profile must lie in the runner's own set (its config, as of the effect) and,
    when the server scoped the command to a profile, in the runner record's, the source's and
    the account's sets as they stood when the server queued it (a later change is the admit's or
    the revocation's business, invariant 3)."""
    sets = [f for f in facts if f.kind == "profiles" and f.reason and f.profiles is not None
            and f.determinate]
    queued = _by_command(facts, "queue")
    cands: list[Cand] = []
    for e in _effects(facts):
        if not e.profile:
            continue
        p = _latest(sets, "config", None, e.seq)
        if p is not None and p.profiles is not None and e.profile not in p.profiles:
            cands.append((e.seq, (p, e), f"profile {e.profile} is not in the runner's config set"))
            continue
        qs = [q for q in queued.get(e.command_id or "", []) if q.seq < e.seq and q.profile]
        if not qs:
            continue
        q = qs[-1]
        for scope in ("runner", "source", *(("account",) if q.account else ())):
            p = _latest(sets, scope, q.account, q.seq)
            if p is not None and p.profiles is not None and e.profile not in p.profiles:
                cands.append((e.seq, (p, q, e), f"profile {e.profile} was not in the {scope} set "
                               "when the command was queued"))
                break
    return _first(cands)


# -- 10 -----------------------------------------------------------------------------------------
CONFLICT = "idempotency_conflict"


def fingerprint_conflict(facts: Sequence[Fact]) -> Found:
    """The row keeps the fingerprint of the first delivery the runner answered; a result for the
    same id with another fingerprint must be idempotency_conflict (never the stored reply)."""
    retires = [f.seq for f in facts if f.kind == "retire"]
    cands: list[Cand] = []
    for rs in _by_command(facts, "result").values():
        rs = [r for r in rs if r.determinate and r.fingerprint is not None]
        first = next((r for r in rs if r.code != CONFLICT), None)
        if first is None:
            continue
        for later in rs:
            if later.seq <= first.seq or later.fingerprint == first.fingerprint:
                continue
            if later.code == CONFLICT or any(first.seq < s < later.seq for s in retires):
                continue
            cands.append((later.seq, (first, later),
                          f"another payload under {later.command_id} answered "
                          f"{later.code or 'a result'}, not {CONFLICT}"))
            break
    return _first(cands)


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
        if f.kind == "deliver" and f.epoch and f.command_id:
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
    return _first(cands)


INVARIANTS: tuple[Invariant, ...] = (
    Invariant("INV-1", "at most one Hermes effect per command id", one_effect),
    Invariant("INV-2", "no effect without an admit granted before it in the same epoch",
              admit_before),
    Invariant("INV-3", "no effect after its revocation or after the runner's disable",
              no_effect_after_revoke),
    Invariant("INV-4", "no event of a session posted on a channel that does not own it",
              event_on_owner),
    Invariant("INV-5", "no result, event or tool call accepted under a stale epoch or from a "
              "fenced instance", no_stale_accept),
    Invariant("INV-6", "every completed receipt survives: a redelivery is answered with the "
              "same result", same_receipt),
    Invariant("INV-7", "a started command is never executed again after a restart; an unstored "
              "one is answered runner_command_uncertain", started_not_rerun),
    Invariant("INV-8", "no channel or lease alive after its close (or after the new epoch that "
              "ended it)", closed_stays_closed),
    Invariant("INV-9", "effective profiles are the intersection config ∩ runner ∩ account ∩ "
              "source: no effect for a profile outside it",
              profiles_intersection),
    Invariant("INV-10", "a command id delivered again with another payload is answered "
              "idempotency_conflict, never from the ledger", fingerprint_conflict),
    Invariant("INV-11", "a result is posted under the epoch its command was delivered in, never "
              "under a stale one",
              result_epoch),
)
BY_ID = {inv.id: inv for inv in INVARIANTS}


def check(facts: Sequence[Fact], invariants: Sequence[Invariant] = INVARIANTS) -> Report:
    """Every invariant over ``facts``; unjoined effects listed apart."""
    report = Report(unjoined=[f for f in facts if f.kind == "effect" and f.command_id is None])
    for inv in invariants:
        v = inv(facts)
        if v is not None:
            report.violations.append(v)
    return report
