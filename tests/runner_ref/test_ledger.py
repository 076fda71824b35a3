"""The ledger's sans-IO decisions (protocol 1 §4): tables, rules, and a Hypothesis story."""
from __future__ import annotations

import dataclasses

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from runner_ref import ledger as L
from tests.budget import examples

HOUR_MS = 3_600_000


def row(state: L.State, fp: str = "a", created: int = 0) -> L.Row:
    return L.Row(id="c1", fingerprint=fp, state=state,
                 result='{"result":1}' if state is L.State.COMPLETE else None, created=created)


def test_transitions_are_the_table() -> None:
    assert L.transition(None, L.Event.START) is L.State.STARTED
    assert L.transition(L.State.STARTED, L.Event.COMPLETE) is L.State.COMPLETE
    assert L.transition(L.State.COMPLETE, L.Event.RETIRE) is L.State.RETIRED


@pytest.mark.parametrize("state,event", [
    (None, L.Event.COMPLETE), (None, L.Event.RETIRE), (L.State.STARTED, L.Event.START),
    (L.State.STARTED, L.Event.RETIRE), (L.State.COMPLETE, L.Event.START),
    (L.State.COMPLETE, L.Event.COMPLETE), (L.State.RETIRED, L.Event.START),
    (L.State.RETIRED, L.Event.COMPLETE), (L.State.RETIRED, L.Event.RETIRE),
])
def test_forbidden_transitions_raise(state: L.State | None, event: L.Event) -> None:
    with pytest.raises(L.LedgerError):
        L.transition(state, event)


@pytest.mark.parametrize("stored,flight,fp,expected", [
    (None, None, "a", L.DeliveryDecision.START),
    (None, "a", "a", L.DeliveryDecision.JOIN),
    (None, "a", "b", L.DeliveryDecision.CONFLICT),
    (row(L.State.STARTED), "a", "a", L.DeliveryDecision.JOIN),
    (row(L.State.STARTED), None, "a", L.DeliveryDecision.UNCERTAIN),
    (row(L.State.RETIRED), None, "a", L.DeliveryDecision.UNCERTAIN),
    (row(L.State.COMPLETE), None, "a", L.DeliveryDecision.REPLAY),
    (row(L.State.COMPLETE), None, "b", L.DeliveryDecision.CONFLICT),
    (row(L.State.STARTED), None, "b", L.DeliveryDecision.CONFLICT),   # conflict checked first
    (row(L.State.RETIRED), None, "b", L.DeliveryDecision.CONFLICT),
])
def test_delivery_rules(stored: L.Row | None, flight: str | None, fp: str,
                        expected: L.DeliveryDecision) -> None:
    assert L.decide(stored, flight, fp) is expected


def test_deadline() -> None:
    assert L.deadline_ok(1001, 1000)
    assert not L.deadline_ok(1000, 1000)
    assert not L.deadline_ok(None, 0) and not L.deadline_ok("5", 0) and not L.deadline_ok(True, 0)


def test_retire_due_only_old_complete_rows() -> None:
    assert L.retire_due(row(L.State.COMPLETE, created=0), HOUR_MS + 1, HOUR_MS)
    assert not L.retire_due(row(L.State.COMPLETE, created=1), HOUR_MS + 1, HOUR_MS)
    assert not L.retire_due(row(L.State.STARTED, created=0), 10 * HOUR_MS, HOUR_MS)


def test_retire_counter_every_256() -> None:
    c = L.RetireCounter(256)
    ticks = [c.tick() for _ in range(512)]
    assert [i for i, t in enumerate(ticks) if t] == [255, 511]


def test_reply_codes() -> None:
    assert L.CONFLICT["error"]["code"] == "idempotency_conflict"
    assert L.UNCERTAIN["error"]["code"] == "runner_command_uncertain"
    assert L.NOT_ADMITTED["error"]["code"] == "runner_command_not_admitted"


class LedgerStory(RuleBasedStateMachine):
    """Deliveries, duplicates, conflicting replays, completions, crashes and the clock.
    Invariant: no command executes twice, whatever happens."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: dict[str, L.Row] = {}
        self.flight: dict[str, str] = {}
        self.executions: dict[str, int] = {}
        self.now = 10 * HOUR_MS

    @rule(cid=st.sampled_from(["c1", "c2", "c3"]), variant=st.sampled_from(["p", "q"]))
    def deliver(self, cid: str, variant: str) -> None:
        fp = f"{cid}:{variant}"
        stored = self.rows.get(cid)
        d = L.decide(stored, self.flight.get(cid), fp)
        if d is L.DeliveryDecision.START:
            L.transition(None, L.Event.START)
            self.rows[cid] = L.Row(cid, fp, L.State.STARTED, None, self.now)
            self.flight[cid] = fp
        elif d is L.DeliveryDecision.CONFLICT:
            known = stored.fingerprint if stored else self.flight[cid]
            assert known != fp
        elif d is L.DeliveryDecision.REPLAY:
            assert stored is not None and stored.result == f'"reply-{cid}"'
        elif d is L.DeliveryDecision.UNCERTAIN:
            assert stored is not None and cid not in self.flight
            assert stored.state in (L.State.STARTED, L.State.RETIRED)
        else:
            assert d is L.DeliveryDecision.JOIN and self.flight[cid] == fp

    @precondition(lambda self: bool(self.flight))
    @rule(data=st.data())
    def finish(self, data: st.DataObject) -> None:
        cid = data.draw(st.sampled_from(sorted(self.flight)))
        self.executions[cid] = self.executions.get(cid, 0) + 1
        old = self.rows[cid]
        new_state = L.transition(old.state, L.Event.COMPLETE)
        self.rows[cid] = dataclasses.replace(old, state=new_state, result=f'"reply-{cid}"')
        del self.flight[cid]

    @rule()
    def crash_and_restart(self) -> None:
        self.flight.clear()  # in-memory flights die with the process; rows survive

    @rule(minutes=st.integers(0, 120))
    def time_passes_and_retire(self, minutes: int) -> None:
        self.now += minutes * 60_000
        for cid, r in list(self.rows.items()):
            if L.retire_due(r, self.now, HOUR_MS):
                self.rows[cid] = dataclasses.replace(
                    r, state=L.transition(r.state, L.Event.RETIRE), result=None)

    @invariant()
    def at_most_one_execution(self) -> None:
        assert all(n <= 1 for n in self.executions.values())

    @invariant()
    def flights_have_started_rows(self) -> None:
        for cid in self.flight:
            assert self.rows[cid].state is L.State.STARTED

    @invariant()
    def only_complete_rows_hold_replies(self) -> None:
        for r in self.rows.values():
            assert (r.result is not None) == (r.state is L.State.COMPLETE)


LedgerStory.TestCase.settings = settings(max_examples=examples(ci=50), stateful_step_count=30)
TestLedgerStory = LedgerStory.TestCase
