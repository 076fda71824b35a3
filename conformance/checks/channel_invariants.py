"""The invariants of channels, sessions and leases: events go to the channel that owns their
session, and nothing lives after its close (INV-4, INV-8), as rows of ``(id, sentence, checker)``.

Rules:
- INV-4: a successful ``session.create``/``session.resume`` result (``OWNING_METHODS``) makes
  its channel the session's owner; a determinate event of the session on a channel that owned
  it at no point before is a violation.
- INV-8: an effect (joined to a command), an event (other than the ``closed`` one) or a tool
  call after the close of its channel or lease is a violation; an effect whose request was held
  inside Hermes before the close is not counted. A new epoch ends every channel and lease of the
  older ones (protocol §2.4): an event or tool call posted for one *under the new epoch* proves
  the runner kept it alive.
"""

from __future__ import annotations

from collections.abc import Sequence

from .facts import Fact
from .proof import Cand, Found, Invariant, first, held_before

#: gateway.rpc methods whose result makes the channel own the session in it.
OWNING_METHODS = frozenset({"session.create", "session.resume"})


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
    return first(cands)


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
            if c.seq >= f.seq or (f.kind == "effect" and held_before(held, f, c.seq)):
                continue
            if (c.connection_id and c.connection_id == f.connection_id) or (
                    c.lease_id and c.lease_id == f.lease_id):
                cands.append((f.seq, (c, f), f"{f.kind} on a closed "
                               f"{'channel' if c.connection_id else 'lease'}"))
                break
    cands += _ended_by_epoch(facts)
    return first(cands)


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


ROWS: tuple[Invariant, ...] = (
    Invariant("INV-4", "no event of a session posted on a channel that does not own it",
              event_on_owner),
    Invariant("INV-8", "no channel or lease alive after its close (or after the new epoch that "
              "ended it)", closed_stays_closed),
)
