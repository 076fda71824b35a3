"""The fact model: one recorded event of a run, as the checker sees it.

Rules:
- A fact is immutable and is named by its ``seq``, taken from the one shared sequence of the run
  (control-plane history and lifecycle log, scripted Hermes' effect log, harness steps), so facts
  of different sources are ordered by ``seq`` alone and no two facts share one.
- ``seq_out`` is the answer's seq for facts made from a request/answer pair (``None`` otherwise,
  or when no answer was made). ``at_out`` is when the answer existed (``seq_out`` or ``seq``).
- ``indeterminate`` marks an operation whose outcome is unknown (the runner died mid-call, an
  answer was dropped): it may or may not have happened. Invariants never count it as having
  happened and never as not having happened: it cannot be part of a proof, and it defeats a proof
  of absence ("no granted admit before").
- ``kind`` is one of ``KINDS`` below; the other fields are the join keys a kind carries.
- One history is one runner: the checker assumes a single runner id.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Source = Literal["control-plane", "hermes", "harness"]

#: kind → (source, what it means). The rows are documentation and the validity check of ``Fact``.
KINDS: dict[str, tuple[Source, str]] = {
    "queue": ("control-plane", "the server queued a command (op = kind; account, profile it acts for)"),
    "poll": ("control-plane", "a poll answered 200 (epoch = its request's epoch header, reason = "
             "the epoch the answer gave)"),
    "deliver": ("control-plane", "a poll answer carried the command (op = command kind)"),
    "carried": ("control-plane", "a command delivered before the example began that its instance "
                "has posted no result of (with its id) since: context, read by INV-11 only"),
    "admit": ("control-plane", "the admit of a command was answered (outcome granted|refused)"),
    "result": ("control-plane", "the runner posted a command's result (code = its error code)"),
    "event": ("control-plane", "the runner posted a channel event (op frame|closed)"),
    "tool": ("control-plane", "the runner relayed a tool call of a lease"),
    "epoch": ("control-plane", "the server issued a new epoch for the runner"),
    "fence": ("control-plane", "the server retired (fenced) a runner instance"),
    "revoke": ("control-plane", "a channel, a lease or the account authorization was revoked"),
    "disable": ("control-plane", "the runner was disabled"),
    "close": ("control-plane", "a channel or lease is closed (the close command's ok result)"),
    "profiles": ("control-plane", "the allowed profiles of one scope (reason = config|runner|account|"
                 "source; account names the account)"),
    "effect": ("hermes", "a side effect in Hermes that executes a command (op = effect kind)"),
    "consequence": ("hermes", "a side effect Hermes made on its own (a turn's steps, closes)"),
    "kill": ("harness", "the runner instance was killed (reason = the kill point)"),
    "start": ("harness", "a runner process started (instance when known)"),
    "server_restart": ("harness", "the control plane restarted"),
    "held": ("harness", "a request reached a Hermes pause point (command_id or session_id)"),
    "retire": ("harness", "receipts completed before this fact may be retired (clock +1 h)"),
}

#: the fingerprint of a result post that may answer either of two payloads of its id (a slow
#: runner answered the first after a second was delivered): the ledger invariants do not judge it
UNKNOWN_FP = "?"


@dataclass(frozen=True)
class Fact:
    """One recorded event; see ``KINDS`` for what each kind means and carries."""

    seq: int
    source: Source
    kind: str
    command_id: str | None = None
    connection_id: str | None = None
    session_id: str | None = None
    lease_id: str | None = None
    call_id: str | None = None
    epoch: str | None = None
    instance: str | None = None
    outcome: str | None = None  # admit: granted | refused; result/event/tool: accepted | refused
    reason: str | None = None
    indeterminate: bool = False
    raw: str | None = None  # where it came from: "history#12", "lifecycle#7", "effects#3"
    seq_out: int | None = None
    op: str | None = None  # command kind, effect kind, event op
    method: str | None = None  # gateway.rpc method of the command
    code: str | None = None  # the runner's error code in a result, None for a success result
    body: str | None = None  # canonical JSON of a result body (compared across redeliveries)
    fingerprint: str | None = None  # of the command as delivered
    profile: str | None = None  # the profile a command or effect acts for
    account: str | None = None  # the account a command acts for (queue, deliver, effect, revoke)
    profiles: frozenset[str] | None = None  # the allowed set of a ``profiles`` fact

    def __post_init__(self) -> None:
        row = KINDS.get(self.kind)
        if row is None:
            raise ValueError(f"unknown fact kind {self.kind!r}")
        if row[0] != self.source:
            raise ValueError(f"a {self.kind!r} fact comes from {row[0]}, not {self.source}")

    @property
    def at_out(self) -> int:
        """The seq at which the answer existed (the request's seq when there is none)."""
        return self.seq_out if self.seq_out is not None else self.seq

    @property
    def determinate(self) -> bool:
        return not self.indeterminate


def fact(seq: int, kind: str, **kw: object) -> Fact:
    """A fact whose source is the one its kind comes from (handy for harness steps and tests)."""
    return Fact(seq, KINDS[kind][0], kind, **kw)  # type: ignore[arg-type]
