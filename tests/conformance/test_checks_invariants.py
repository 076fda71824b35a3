"""Each invariant of conformance.checks on hand-built fact lists: one that violates it (reported
with exactly the expected witness seqs), ones that satisfy it, indeterminate cases included."""

from __future__ import annotations

import pytest

from conformance.checks import INVARIANTS, check
from conformance.checks.facts import Fact, fact
from conformance.checks.invariants import BY_ID
from conformance.checks.render import render, render_all
from conformance.checks.witness import is_minimal, minimise


def d(seq: int, cid: str = "c1", inst: str = "i1", **kw: object) -> Fact:
    return fact(seq, "deliver", command_id=cid, instance=inst, epoch=kw.pop("epoch", "E1"), **kw)


def a(seq: int, cid: str = "c1", inst: str = "i1", outcome: str | None = "granted", **kw: object) -> Fact:
    return fact(seq, "admit", command_id=cid, instance=inst, outcome=outcome,
                epoch=kw.pop("epoch", "E1"), **kw)


def e(seq: int, cid: str | None = "c1", **kw: object) -> Fact:
    return fact(seq, "effect", command_id=cid, op=kw.pop("op", "prompt.accepted"), **kw)


def r(seq: int, cid: str = "c1", inst: str = "i1", body: str = '{"result":1}', **kw: object) -> Fact:
    return fact(seq, "result", command_id=cid, instance=inst, body=body,
                outcome=kw.pop("outcome", "accepted"), epoch=kw.pop("epoch", "E1"), **kw)


def ep(seq: int, epoch: str) -> Fact:
    return fact(seq, "epoch", epoch=epoch)


def carried(seq: int, cid: str = "c0", inst: str = "i1", epoch: str = "E1") -> Fact:
    """A delivery an earlier example made that ``inst`` has not answered (a kept world)."""
    return fact(seq, "carried", command_id=cid, instance=inst, epoch=epoch, seq_out=seq + 1)


# (name, invariant id, facts, expected witness seqs)
VIOLATING: list[tuple[str, str, list[Fact], list[int]]] = [
    ("two effects", "INV-1", [d(1), a(2), e(3), e(4), r(5)], [1, 3, 4]),
    ("no admit at all", "INV-2", [d(1), e(3), r(4)], [1, 3]),
    ("admit after the effect", "INV-2", [d(1), e(3), a(4), r(5)], [3, 4]),
    ("admit in an older epoch, a new process since", "INV-2",
     [ep(0, "E1"), d(1), a(2), ep(3, "E2"), fact(4, "poll", instance="i2", reason="E2", seq_out=5),
      e(6)], [2, 3, 4, 6]),
    ("admit refused", "INV-2", [d(1), a(2, outcome="refused"), e(3)], [2, 3]),
    ("admit answer dropped", "INV-2", [d(1), a(2, outcome=None, reason="drop"), e(3)], [2, 3]),
    ("held only after the epoch change", "INV-2",
     [ep(0, "E1"), d(1), a(2), ep(3, "E2"), fact(4, "held", command_id="c1"),
      fact(5, "poll", instance="i2", reason="E2", seq_out=6), e(7)], [2, 3, 5, 7]),
    ("effect after channel revoked", "INV-3",
     [d(1, connection_id="ch1"), a(2), fact(3, "revoke", connection_id="ch1", reason="channel"),
      e(4, connection_id="ch1", method="prompt.submit")], [2, 3, 4]),
    ("effect after lease revoked", "INV-3",
     [d(1, lease_id="L1"), a(2), fact(3, "revoke", lease_id="L1", reason="lease"),
      e(4, lease_id="L1", op="bind")], [2, 3, 4]),
    ("effect after account authorization change", "INV-3",
     [d(1, connection_id="ch1"), a(2), fact(3, "revoke", reason="account_authorization"),
      e(4, connection_id="ch1", method="prompt.submit")], [2, 3, 4]),
    ("stop method after disable", "INV-3",
     [d(1), a(2), fact(3, "disable"), e(4, method="session.interrupt")], [2, 3, 4]),
    ("effect after disable", "INV-3", [d(1), a(2), fact(3, "disable"), e(4)], [2, 3, 4]),
    ("event of a foreign session", "INV-4",
     [r(2, method="session.create", connection_id="ch1", session_id="s1"),
      fact(5, "event", connection_id="ch2", session_id="s1", op="message.delta")], [2, 5]),
    ("result under a stale epoch", "INV-5", [ep(1, "E1"), ep(5, "E2"), r(6, epoch="E1")], [5, 6]),
    ("event from a fenced instance", "INV-5",
     [fact(3, "fence", instance="i1"),
      fact(4, "event", connection_id="ch1", instance="i1", outcome="accepted")], [3, 4]),
    ("redelivery answered differently", "INV-6",
     [r(3, body='{"result":1}'), r(9, inst="i2", body='{"result":2}')], [3, 9]),
    ("completed receipt lost (uncertain, not retired)", "INV-6",
     [r(3), r(9, inst="i2", body='{"error":{"code":"runner_command_uncertain"}}',
             code="runner_command_uncertain")], [3, 9]),
    ("unstored row answered after restart", "INV-7",
     [d(1), a(2), fact(3, "kill", instance="i1", command_id="c1", reason="during_hermes"),
      fact(4, "start", instance="i2"), d(5, inst="i2"), r(6, inst="i2")], [3, 6]),
    ("started row executed again", "INV-7",
     [d(1), a(2), e(3, instance="i1"), fact(4, "kill", instance="i1"),
      fact(5, "start", instance="i2"), d(6, inst="i2"), e(8, instance="i2")], [2, 4, 8]),
    ("started row executed again, instance unknown", "INV-7",
     [d(1), a(2), fact(3, "kill", instance="i1"), fact(4, "start"), e(5)], [2, 3, 4, 5]),
    ("event on a closed channel", "INV-8",
     [fact(5, "close", connection_id="ch1", op="gateway.close"),
      fact(7, "event", connection_id="ch1", session_id="s1", op="message.delta")], [5, 7]),
    ("tool relay on a closed lease", "INV-8",
     [fact(5, "close", lease_id="L1", op="lease.close"), fact(7, "tool", lease_id="L1", call_id="k")],
     [5, 7]),
    ("effect on a closed channel", "INV-8",
     [d(1, connection_id="ch1"), a(2), fact(3, "close", connection_id="ch1"),
      e(4, connection_id="ch1")], [3, 4]),
    ("another payload answered from the ledger", "INV-10",
     [r(3, fingerprint="f1"), r(9, inst="i2", fingerprint="f2")], [3, 9]),
    ("a result under a stale epoch header", "INV-11",
     [d(2, epoch="E2"), r(4, epoch="E1")], [2, 4]),
    ("an admit under the old epoch after the new one was given", "INV-11",
     [d(2, epoch="E1"), r(4, epoch="E1"),
      fact(5, "poll", instance="i1", reason="E2", seq_out=6),
      fact(8, "admit", instance="i1", epoch="E1", outcome="refused")], [5, 8]),
    ("a carried command answered, then an id-less admit under its old epoch", "INV-11",
     [carried(1), fact(3, "result", command_id="c0", instance="i1", epoch="E1",
                       outcome="refused"),
      fact(5, "poll", instance="i1", reason="E2", seq_out=6),
      fact(8, "admit", instance="i1", epoch="E1", outcome="refused")], [5, 8]),
    ("a header of an epoch no carried command was delivered in (the first epoch seen)", "INV-11",
     [carried(1, epoch="E1"), fact(5, "poll", instance="i1", reason="E2", seq_out=6),
      fact(8, "result", instance="i1", epoch="E0", outcome="refused")], [5, 8]),
    ("a carried command of another instance does not excuse this one", "INV-11",
     [carried(1, inst="i0"), fact(5, "poll", instance="i1", reason="E2", seq_out=6),
      fact(8, "result", instance="i1", epoch="E1", outcome="refused")], [5, 8]),
    ("a carried command answered under another epoch", "INV-11",
     [carried(1, epoch="E1"), fact(5, "poll", instance="i1", reason="E2", seq_out=6),
      fact(8, "result", command_id="c0", instance="i1", epoch="E2")], [1, 8]),
    ("event of an old epoch's channel under the new epoch", "INV-8",
     [ep(1, "E1"), d(2, connection_id="ch1", op="gateway.open"), ep(5, "E2"),
      fact(7, "event", connection_id="ch1", epoch="E2", outcome="refused")], [2, 5, 7]),
    ("profile outside the account set when queued", "INV-9",
     [fact(1, "profiles", reason="runner", profiles=frozenset({"a", "b"})),
      fact(2, "profiles", reason="account", account="alice", profiles=frozenset({"b"})),
      fact(3, "queue", command_id="c1", account="alice", profile="a"),
      d(4), a(5), e(6, profile="a")], [2, 3, 6]),
    ("profile outside the runner record when queued", "INV-9",
     [fact(1, "profiles", reason="runner", profiles=frozenset({"b"})),
      fact(3, "queue", command_id="c1", profile="a"), d(4), a(5), e(6, profile="a")], [1, 3, 6]),
    ("profile outside the runner's config set", "INV-9",
     [fact(1, "profiles", reason="config", profiles=frozenset({"b"})),
      d(4), a(5), e(6, profile="a")], [1, 6]),
    ("effect outside the new account profiles after admit", "INV-3",
     [d(1), a(2), fact(3, "revoke", reason="profiles", account="alice", profiles=frozenset({"b"})),
      e(4, profile="a", account="alice")], [2, 3, 4]),
    ("effect of the account after its authorization changed", "INV-3",
     [d(1), a(2), fact(3, "revoke", reason="account_authorization", account="alice"),
      e(4, account="alice")], [2, 3, 4]),
]

SATISFYING: list[tuple[str, list[Fact]]] = [
    ("one effect", [d(1), a(2), e(3), r(4)]),
    ("redelivered, answered from the ledger", [d(1), a(2), e(3), r(4), d(5), r(6)]),
    ("one indeterminate effect", [d(1), a(2), e(3, indeterminate=True)]),
    ("one indeterminate + one determinate", [d(1), a(2), e(3, indeterminate=True), e(5)]),
    ("two indeterminate", [d(1), a(2), e(3, indeterminate=True), e(4, indeterminate=True)]),
    ("indeterminate admit defeats 'no admit'", [d(1), a(2, outcome=None, indeterminate=True), e(3)]),
    ("indeterminate effect without admit", [d(1), e(3, indeterminate=True)]),
    ("unjoined effect is not guessed", [d(1), e(3, cid=None, reason="ambiguous: c1,c2")]),
    ("stop method after channel revoked",
     [d(1, connection_id="ch1"), a(2), fact(3, "revoke", connection_id="ch1", reason="channel"),
      e(4, connection_id="ch1", method="session.interrupt", op="session.interrupted")]),
    ("stop method after the account change",
     [d(1, connection_id="ch1"), a(2), fact(3, "revoke", reason="account_authorization"),
      e(4, connection_id="ch1", method="session.interrupt", op="session.interrupted")]),
    ("held in Hermes before the epoch change",
     [ep(0, "E1"), d(1), a(2), fact(3, "held", command_id="c1"), ep(4, "E2"), e(5)]),
    ("held in Hermes before the revoke",
     [d(1, connection_id="ch1"), a(2), fact(3, "held", command_id="c1"),
      fact(4, "revoke", connection_id="ch1", reason="channel"), e(5, connection_id="ch1")]),
    ("held in Hermes before the close",
     [d(1, connection_id="ch1"), a(2), fact(3, "held", session_id="s1"),
      fact(4, "close", connection_id="ch1"), e(5, connection_id="ch1", session_id="s1")]),
    ("revoke of another channel",
     [d(1, connection_id="ch1"), a(2), fact(3, "revoke", connection_id="ch2", reason="channel"),
      e(4, connection_id="ch1")]),
    ("admitted again after the account change",
     [fact(3, "revoke", reason="account_authorization"), d(4), a(5), e(6)]),
    ("another account's authorization changed",
     [d(1), a(2), fact(3, "revoke", reason="account_authorization", account="bob"),
      e(4, account="alice")]),
    ("a profile change that still allows the effect's profile",
     [d(1), a(2), fact(3, "revoke", reason="profiles", profiles=frozenset({"a"})),
      e(4, profile="a")]),
    ("runner profiles narrowed after the command was queued",
     [fact(1, "profiles", reason="runner", profiles=frozenset({"a", "b"})),
      fact(2, "queue", command_id="c1", profile="a"),
      fact(3, "profiles", reason="runner", profiles=frozenset({"b"})), d(4), a(5),
      e(6, profile="a")]),
    ("account set of another account",
     [fact(1, "profiles", reason="account", account="bob", profiles=frozenset({"b"})),
      fact(2, "queue", command_id="c1", account="alice", profile="a"), d(4), a(5),
      e(6, profile="a")]),
    ("a command the server did not scope: only the config set applies",
     [fact(1, "profiles", reason="runner", profiles=frozenset({"b"})),
      fact(2, "profiles", reason="config", profiles=frozenset({"a", "b"})), d(4), a(5),
      e(6, profile="a")]),
    ("an old channel's event under its own epoch (in flight at the change)",
     [ep(1, "E1"), d(2, connection_id="ch1", op="gateway.open"), ep(5, "E2"),
      fact(7, "event", connection_id="ch1", epoch="E1", outcome="refused")]),
    ("a channel opened in the new epoch",
     [ep(1, "E1"), ep(5, "E2"), d(6, connection_id="ch1", op="gateway.open", epoch="E2"),
      fact(7, "event", connection_id="ch1", epoch="E2")]),
    ("the original payload again after a conflict",
     [r(3, fingerprint="f1"), r(5, fingerprint="f2", body="{}", code="idempotency_conflict"),
      r(9, fingerprint="f1")]),
    ("a result posted under its delivery's epoch after a new one",
     [d(2, epoch="E1"), fact(3, "epoch", epoch="E2"), r(4, epoch="E1", outcome="refused")]),
    ("the old epoch's open command answered after the new epoch was given",
     [d(2, epoch="E1"), fact(5, "poll", instance="i1", reason="E2", seq_out=6),
      a(7, epoch="E1"), r(8, epoch="E1", outcome="refused")]),
    ("a command delivered before the example, answered late under its epoch (FLT-002, slow)",
     [carried(1, epoch="E1"), ep(3, "E2"), fact(5, "poll", instance="i1", reason="E2", seq_out=6),
      fact(7, "admit", instance="i1", epoch="E1", outcome="refused", reason="runner_epoch_changed"),
      fact(9, "result", instance="i1", epoch="E1", outcome="refused",
           reason="runner_epoch_changed")]),
    ("an admit sent before the answer that gave a new epoch",
     [d(2, epoch="E1"), r(3, epoch="E1"), fact(4, "poll", instance="i1", reason="E2", seq_out=9),
      fact(6, "admit", instance="i1", epoch="E1", outcome="refused")]),
    ("indeterminate effect after a revoke",
     [d(1), a(2), fact(3, "disable"), e(4, indeterminate=True)]),
    ("event of an owned session",
     [r(2, method="session.create", connection_id="ch1", session_id="s1"),
      fact(5, "event", connection_id="ch1", session_id="s1")]),
    ("session resumed on a second channel",
     [r(2, method="session.create", connection_id="ch1", session_id="s1"),
      r(3, cid="c2", method="session.resume", connection_id="ch2", session_id="s1"),
      fact(5, "event", connection_id="ch2", session_id="s1")]),
    ("stale result refused", [ep(1, "E1"), ep(5, "E2"), r(6, epoch="E1", outcome="refused")]),
    ("current epoch accepted", [ep(1, "E1"), ep(5, "E2"), r(6, epoch="E2")]),
    ("same receipt after restart", [r(3), fact(4, "kill", instance="i1"), r(9, inst="i2")]),
    ("retired receipt answered uncertain",
     [r(3), fact(4, "retire"), r(9, inst="i2", body="{}", code="runner_command_uncertain")]),
    ("other payload, other answer (idempotency_conflict)",
     [r(3, fingerprint="f1"), r(9, fingerprint="f2", body="{}", code="idempotency_conflict")]),
    ("unstored row answered uncertain",
     [d(1), a(2), fact(3, "kill", instance="i1", command_id="c1", reason="during_hermes"),
      fact(4, "start", instance="i2"), d(5, inst="i2"),
      r(6, inst="i2", body="{}", code="runner_command_uncertain")]),
    ("killed before the started row, run fresh",
     [d(1), fact(2, "kill", instance="i1"), fact(3, "start", instance="i2"), d(4, inst="i2"),
      a(5, inst="i2"), e(6, instance="i2"), r(7, inst="i2")]),
    ("the old call lands after the kill", [d(1), a(2), fact(3, "kill", instance="i1"),
                                           fact(4, "start", instance="i2"), e(5, instance="i1")]),
    ("indeterminate re-run", [d(1), a(2), fact(3, "kill", instance="i1"), fact(4, "start"),
                              e(5, indeterminate=True)]),
    ("closed:true after the close",
     [fact(5, "close", connection_id="ch1"), fact(7, "event", connection_id="ch1", op="closed")]),
    ("event before the close",
     [fact(4, "event", connection_id="ch1"), fact(5, "close", connection_id="ch1")]),
    ("the control plane's epoch change after the granted admit (a restart on its side)",
     [ep(0, "E1"), d(1), a(2), ep(3, "E2"), fact(4, "poll", instance="i1", reason="E2", seq_out=5),
      e(6)]),
    ("profile in the intersection",
     [fact(1, "profiles", reason="runner", profiles=frozenset({"a", "b"})),
      fact(2, "profiles", reason="account", profiles=frozenset({"b"})), d(3), a(4), e(5, profile="b")]),
]


@pytest.mark.parametrize(("name", "inv_id", "facts", "seqs"), VIOLATING, ids=[c[0] for c in VIOLATING])
def test_violation_reported_with_exact_witness(name: str, inv_id: str, facts: list[Fact],
                                               seqs: list[int]) -> None:
    v = BY_ID[inv_id](facts)
    assert v is not None, name
    assert v.seqs == seqs
    assert is_minimal(v)
    assert inv_id in {x.invariant_id for x in check(facts).violations}


@pytest.mark.parametrize(("name", "facts"), SATISFYING, ids=[c[0] for c in SATISFYING])
def test_satisfying_history_has_no_violation(name: str, facts: list[Fact]) -> None:
    report = check(facts)
    assert report.violations == [], [render(v) for v in report.violations]


def test_every_invariant_has_a_violating_and_a_table_row() -> None:
    ids = [inv.id for inv in INVARIANTS]
    assert ids == [f"INV-{i}" for i in range(1, 12)]
    assert set(ids) == {c[1] for c in VIOLATING}
    assert all(inv.sentence and "\n" not in inv.sentence for inv in INVARIANTS)


def test_unjoined_effects_are_listed_apart() -> None:
    report = check([d(1), a(2), e(3, cid=None, reason="no command")])
    assert report.ok and [f.seq for f in report.unjoined] == [3]


def test_minimise_shrinks_a_bigger_proving_set() -> None:
    facts = [d(1), a(2), e(3), fact(4, "start"), e(5), r(6)]
    kept = minimise("INV-1", facts)
    assert [f.seq for f in kept] == [2, 3, 5]  # the admit names the command as well as a delivery
    v = BY_ID["INV-1"](kept)
    assert v is not None and is_minimal(v)
    with pytest.raises(ValueError):
        minimise("INV-1", facts[:3])


def test_render_names_sentence_witness_seed_and_replay() -> None:
    v = BY_ID["INV-1"]([d(1, op="http"), a(2), e(3), e(4, indeterminate=False)])
    assert v is not None
    text = render(v, seed=1234, replay="pytest conformance -k dedupe --hypothesis-seed=1234")
    lines = text.splitlines()
    assert lines[0] == "INV-1 violated: at most one Hermes effect per command id"
    assert [ln.split()[0] for ln in lines if ln.strip().startswith("#")] == ["#1", "#3", "#4"]
    assert "command=c1" in lines[2] and "op=http" in lines[2]
    assert lines[-2:] == ["  seed: 1234", "  replay: pytest conformance -k dedupe --hypothesis-seed=1234"]
    with_steps = render(v, steps="m = M()\nm.deliver_twice()")
    assert with_steps.splitlines()[-3:] == ["  steps:", "    m = M()", "    m.deliver_twice()"]
    assert render_all([v, v]).count("INV-1 violated") == 2


def test_fact_kind_and_source_are_checked() -> None:
    with pytest.raises(ValueError):
        Fact(1, "harness", "effect")
    with pytest.raises(ValueError):
        Fact(1, "hermes", "nonsense")
