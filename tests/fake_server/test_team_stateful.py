"""A Hypothesis state machine over the team world: two administrators, request ids drawn from
a small pool (so they repeat, with the same or other input), every op. Invariants: nothing is
created twice, a repeated request id answers as the first time, the world's counters add up."""
from __future__ import annotations

import json
from typing import Any

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from fake_server.team import Actor, Origin, TeamError, TeamWorld

ACTORS = {n: Actor(n, Origin(n, f"s-{n}"), frozenset({"default"})) for n in ("ana", "ben")}
NAMES = st.sampled_from(["Ada", "Bo", "Cy"])
TITLES = st.sampled_from(["ship", "audit"])
RIDS = st.sampled_from([f"r{i}" for i in range(6)])
ACTOR = st.sampled_from(sorted(ACTORS))
CALLS = st.one_of(
    st.tuples(st.just("create_member"), st.fixed_dictionaries(
        {"name": NAMES, "profile": st.sampled_from(["default", "other"])})),
    st.tuples(st.just("form_team"), st.fixed_dictionaries(
        {"name": st.sampled_from(["core", "ops"]),
         "members": st.lists(NAMES, min_size=1, max_size=2, unique=True)})),
    st.tuples(st.just("create_task"), st.fixed_dictionaries(
        {"team": st.sampled_from(["core", "ops"]), "title": TITLES, "goal": st.just("g")})),
    st.tuples(st.just("assign_task"), st.fixed_dictionaries({"task": TITLES, "member": NAMES})),
    st.tuples(st.just("review_task"), st.fixed_dictionaries(
        {"task": TITLES, "verdict": st.sampled_from(["approve", "changes"])})),
    st.tuples(st.just("complete_goal"), st.fixed_dictionaries(
        {"task": TITLES, "summary": st.just("s")})),
)


class TeamWorldMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.world = TeamWorld()
        self.first: dict[tuple[str, str], tuple[str, dict[str, Any], dict[str, Any]]] = {}
        self.successes = 0
        self.replays = 0
        self.reports = 0

    @rule(actor=ACTOR, rid=RIDS, call=CALLS)
    def call(self, actor: str, rid: str, call: tuple[str, dict[str, Any]]) -> None:
        op, args = call
        args = {**args, "requestId": rid}
        key = (actor, rid)
        before = json.dumps(self.world.snapshot(), sort_keys=True)
        try:
            answer = self.world.apply(ACTORS[actor], op, args)
        except TeamError as e:
            assert json.dumps(self.world.snapshot(), sort_keys=True) == before
            if key in self.first and (self.first[key][0], self.first[key][1]) != (op, args):
                assert e.code == "idempotency_conflict"
            assert key not in self.first or e.code == "idempotency_conflict"
            return
        if key in self.first:
            assert (op, args) == self.first[key][:2] and answer == self.first[key][2]
            assert json.dumps(self.world.snapshot(), sort_keys=True) == before
            self.replays += 1
        else:
            self.first[key] = (op, args, answer)
            self.successes += 1
            self.reports += op == "complete_goal"

    @invariant()
    def counters_add_up(self) -> None:
        w = self.world
        assert w.executions == w.revision == len(w.log) == self.successes
        assert w.replays == self.replays and len(w.outbox) == self.reports
        made = [k for k, v in self.first.items() if v[0] == "create_member"]
        assert len(w.members) == len(made)  # nothing created twice
        for t in w.tasks.values():
            steps = sum(1 for op, a, _ in self.first.values()
                        if op in ("assign_task", "review_task", "complete_goal")
                        and a["task"] == t.title)
            assert t.version == 1 + steps


TeamWorldMachine.TestCase.settings = settings(max_examples=40, stateful_step_count=30,
                                              derandomize=True, deadline=None)
test_team_world_machine = TeamWorldMachine.TestCase
