"""The invariants of authority: an effect runs only when it was admitted, not revoked since, and
for a profile every party allows (INV-2, INV-3, INV-9), as rows of ``(id, sentence, checker)``.

Rules:
- INV-2: an effect needs an admit of its command granted before the effect with no epoch change
  in between (an indeterminate admit before it may have been granted, so it defeats the proof).
  An epoch change does not count when a ``held`` fact shows the request was already inside
  Hermes before it, nor when it was the control plane's alone (a restart or watchdog between
  the granted admit and the effect: a runner's last check before its Hermes call and a delay on
  the way to Hermes look the same from outside, so that race is never the runner's failure);
  it counts when a new process of the runner was given an epoch in between. A command
  delivered but never admitted is proved by its delivery.
- INV-3: "after" a revocation or the runner's disable is judged by the effect's seq, between the
  granted admit and the effect. A disable covers everything; the stop methods
  (``STOP_METHODS``) may still run after a revocation; a ``profiles`` revocation covers the
  profiles it no longer allows (of its account, if it names one); a runner-wide revocation
  (``RUNNER_WIDE``) without a channel or lease covers every command (of its account, if it names
  one); otherwise it covers its channel or its lease. A request held before the revocation is
  not counted against the runner.
- INV-9: an effect's profile lies in the runner's config set as of the effect and, when the
  server scoped the command to a profile, in the runner record's, the source's and the account's
  sets as they stood when the server queued it (a later change is INV-3's business).
"""

from __future__ import annotations

from collections.abc import Sequence

from .facts import Fact
from .proof import Cand, Found, Invariant, by_command, effects, epochs_between, first, held_before

#: gateway.rpc methods exempt from the channel validity check (stop methods, protocol §3).
STOP_METHODS = frozenset({"session.interrupt", "session.close", "session.active_list"})
#: revocations that cover every channel and lease of the runner.
RUNNER_WIDE = frozenset({"account_authorization", "account_active", "profiles", "runner_disabled"})


# -- 2 ------------------------------------------------------------------------------------------
def admit_before(facts: Sequence[Fact]) -> Found:
    delivered = by_command(facts, "deliver")
    admits = by_command(facts, "admit")
    held = [f for f in facts if f.kind == "held"]

    polls = [f for f in facts if f.kind == "poll" and f.instance and f.reason]

    def same_epoch(a: Fact, e: Fact) -> bool:
        eps = epochs_between(facts, a.at_out, e.seq)
        if not eps or held_before([h for h in held if h.seq > a.at_out], e, eps[0].seq):
            return True
        # the epoch changed on the control plane's side (a restart, a watchdog) after the admit
        # was granted: the runner's check before the Hermes call cannot be told apart from an
        # ordinary delay on the way to Hermes, so only a new process of the runner given an
        # epoch in between (its admit cannot cover what a new process does) counts
        return new_process(a, e) is None

    def new_process(a: Fact, e: Fact) -> Fact | None:
        return next((p for p in polls if p.instance != a.instance and a.at_out < p.at_out < e.seq),
                    None)

    cands: list[Cand] = []
    for e in effects(facts):
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
            ep = epochs_between(facts, a.at_out, e.seq)[0]
            p = new_process(a, e)
            cands.append((e.seq, (a, ep, e) if p is None else (a, ep, p, e),
                          f"admit #{a.seq} was granted in an older epoch"))
        elif granted:
            cands.append((e.seq, (granted[0], e), f"admit #{granted[0].seq} was granted after the effect"))
        elif any(a.determinate for a in mine):
            a = next(a for a in mine if a.determinate)
            cands.append((e.seq, (a, e), f"admit #{a.seq} was not granted"))
        elif not mine and delivered.get(cid):
            d = [d for d in delivered[cid] if d.seq < e.seq] or delivered[cid]
            cands.append((e.seq, (d[-1], e), "the runner never asked to admit it"))
    return first(cands)


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
    admits = by_command(facts, "admit")
    revokes = [f for f in facts if f.kind in ("revoke", "disable") and f.determinate]
    held = [f for f in facts if f.kind == "held"]
    cands: list[Cand] = []
    for e in effects(facts):
        granted = [a for a in admits.get(e.command_id or "", [])
                   if a.determinate and a.outcome == "granted" and a.at_out < e.seq]
        if not granted:
            continue  # invariant 2's business
        a = granted[-1]
        for r in revokes:
            if a.at_out < r.seq < e.seq and _covers(r, e) and not held_before(held, e, r.seq):
                cands.append((e.seq, (a, r, e), f"{r.kind} #{r.seq} came between admit and effect"))
                break
    return first(cands)


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
    queued = by_command(facts, "queue")
    cands: list[Cand] = []
    for e in effects(facts):
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
    return first(cands)


ROWS: tuple[Invariant, ...] = (
    Invariant("INV-2", "no effect without an admit granted before it in the same epoch",
              admit_before),
    Invariant("INV-3", "no effect after its revocation or after the runner's disable",
              no_effect_after_revoke),
    Invariant("INV-9", "effective profiles are the intersection config ∩ runner ∩ account ∩ "
              "source: no effect for a profile outside it",
              profiles_intersection),
)
