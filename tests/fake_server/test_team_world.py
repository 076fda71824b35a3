"""The team world, sans-IO: lifecycle, idempotency by request id, compare-and-set, reports."""
from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fake_server.team import TEAM_CODES, TRANSITIONS, Actor, Origin, TeamError, TeamWorld
from fake_server.team.lifecycle import APPROVED, ASSIGNED, CHANGES, COMPLETE, OPEN, next_state

ANA = Actor("ana", Origin("ana", "sess-a", "stored-a"), frozenset({"default"}))
BEN = Actor("ben", Origin("ben", "sess-b", "stored-b"), frozenset({"default"}))


def setup_task(w: TeamWorld, actor: Actor = ANA) -> None:
    w.apply(actor, "create_member", {"requestId": "m1", "name": "Ada", "profile": "default"})
    w.apply(actor, "create_member", {"requestId": "m2", "name": "Bo", "profile": "default"})
    w.apply(actor, "form_team", {"requestId": "t1", "name": "core", "members": ["Ada", "Bo"]})
    w.apply(actor, "create_task", {"requestId": "k1", "team": "core", "title": "ship",
                                   "goal": "Ship v1"})


def refused(w: TeamWorld, actor: Actor, op: str, args: Any) -> str:
    before = json.dumps(w.snapshot(), sort_keys=True)
    with pytest.raises(TeamError) as e:
        w.apply(actor, op, args)
    assert json.dumps(w.snapshot(), sort_keys=True) == before  # a refusal changes nothing
    assert e.value.code in TEAM_CODES
    return e.value.code


def test_the_whole_lifecycle_ends_with_a_report_to_the_originating_session() -> None:
    w = TeamWorld()
    setup_task(w)
    a = w.apply(ANA, "assign_task", {"requestId": "a1", "task": "ship", "member": "Ada"})
    assert a["task"]["state"] == ASSIGNED and a["task"]["assignee"] == "Ada"
    r = w.apply(BEN, "review_task", {"requestId": "r1", "task": "ship", "verdict": "approve"})
    assert r["task"]["state"] == APPROVED and r["task"]["reviews"][0]["by"] == "ben"
    assert w.outbox == []
    done = w.apply(BEN, "complete_goal", {"requestId": "c1", "task": "ship", "summary": "done"})
    assert done["task"]["state"] == COMPLETE and done["reportTo"] == "ana"
    [report] = w.take_reports()
    assert report.origin == ANA.origin  # back to the session the task came from, not ben's
    assert report.text.startswith("REPORT task ship") and "Ship v1" in report.text
    assert w.outbox == [] and w.executions == 7 and w.revision == 7


def test_a_repeated_request_id_creates_nothing_twice() -> None:
    w = TeamWorld()
    args = {"requestId": "m1", "name": "Ada", "profile": "default"}
    first = w.apply(ANA, "create_member", dict(args))
    again = w.apply(ANA, "create_member", dict(args))
    assert again == first and len(w.members) == 1
    assert (w.executions, w.replays, w.revision) == (1, 1, 1)
    code = refused(w, ANA, "create_member", {**args, "name": "Eve"})
    assert code == "idempotency_conflict" and "Eve" not in w.members
    # Another operation under the same id is other input too.
    assert refused(w, ANA, "form_team", {"requestId": "m1", "name": "x",
                                         "members": ["Ada"]}) == "idempotency_conflict"


def test_request_ids_are_per_administrator() -> None:
    w = TeamWorld()
    w.apply(ANA, "create_member", {"requestId": "r", "name": "Ada", "profile": "default"})
    b = w.apply(BEN, "create_member", {"requestId": "r", "name": "Cy", "profile": "default"})
    assert b["member"]["name"] == "Cy" and len(w.members) == 2


def test_a_refused_step_is_not_remembered_and_may_be_retried() -> None:
    w = TeamWorld()
    args = {"requestId": "t1", "name": "core", "members": ["Ada"]}
    assert refused(w, ANA, "form_team", args) == "team_member_not_found"
    w.apply(ANA, "create_member", {"requestId": "m1", "name": "Ada", "profile": "default"})
    assert w.apply(ANA, "form_team", args)["team"]["members"] == ["Ada"]


@pytest.mark.parametrize("step", [t.step for t in TRANSITIONS])
@pytest.mark.parametrize("state", [OPEN, ASSIGNED, APPROVED, CHANGES, COMPLETE])
def test_the_transition_table_is_what_runs(step: str, state: str) -> None:
    row = next(t for t in TRANSITIONS if t.step == step)
    if state in row.from_states:
        assert next_state(step, state) == row.to_state
    else:
        with pytest.raises(TeamError) as e:
            next_state(step, state)
        assert e.value.code == "team_task_state"


def test_steps_out_of_order_are_refused() -> None:
    w = TeamWorld()
    setup_task(w)
    assert refused(w, ANA, "complete_goal", {"requestId": "c", "task": "ship",
                                             "summary": "s"}) == "team_task_state"
    assert refused(w, ANA, "review_task", {"requestId": "r", "task": "ship",
                                           "verdict": "approve"}) == "team_task_state"
    w.apply(ANA, "assign_task", {"requestId": "a1", "task": "ship", "member": "Ada"})
    w.apply(ANA, "review_task", {"requestId": "r1", "task": "ship", "verdict": "changes"})
    assert refused(w, ANA, "complete_goal", {"requestId": "c", "task": "ship",
                                             "summary": "s"}) == "team_task_state"
    w.apply(ANA, "assign_task", {"requestId": "a2", "task": "ship", "member": "Bo"})
    assert w.tasks["ship"].assignee == "Bo" and w.tasks["ship"].state == ASSIGNED


def test_compare_and_set_on_the_task_version_prevents_a_lost_update() -> None:
    w = TeamWorld()
    setup_task(w)
    w.apply(ANA, "assign_task", {"requestId": "a1", "task": "ship", "member": "Ada"})
    v = w.apply(ANA, "get_task", {"task": "ship"})["task"]["version"]
    w.apply(ANA, "review_task", {"requestId": "ra", "task": "ship", "verdict": "changes",
                                 "expectedVersion": v})
    # Ben read the same version: his approve would overwrite ana's verdict unseen.
    assert refused(w, BEN, "review_task", {"requestId": "rb", "task": "ship",
                                           "verdict": "approve",
                                           "expectedVersion": v}) == "team_version_conflict"
    assert [r["verdict"] for r in w.tasks["ship"].reviews] == ["changes"]


@pytest.mark.parametrize(("op", "args", "code"), [
    ("create_member", {"requestId": "x", "name": "Ada"}, "team_invalid_arguments"),
    ("create_member", {"requestId": "x", "name": "Ada", "profile": "default", "admin": "ben"},
     "team_invalid_arguments"),
    ("create_member", {"requestId": "", "name": "Ada", "profile": "default"},
     "team_invalid_arguments"),
    ("create_member", ["not", "an", "object"], "team_invalid_arguments"),
    ("create_member", {"requestId": "x", "name": "Eve", "profile": "secret-profile"},
     "team_profile_forbidden"),
    ("review_task", {"requestId": "x", "task": "ship", "verdict": "maybe"},
     "team_invalid_arguments"),
    ("assign_task", {"requestId": "x", "task": "nope", "member": "Ada"}, "team_task_not_found"),
    ("assign_task", {"requestId": "x", "task": "ship", "member": "Zed"}, "team_member_not_found"),
    ("form_team", {"requestId": "x", "name": "core", "members": ["Ada"]}, "team_team_exists"),
    ("create_task", {"requestId": "x", "team": "core", "title": "ship", "goal": "g"},
     "team_task_exists"),
    ("create_task", {"requestId": "x", "team": "nope", "title": "t2", "goal": "g"},
     "team_team_not_found"),
    ("delete_everything", {}, "team_tool_unknown"),
])
def test_bad_input_gets_a_precise_code_and_no_echo(op: str, args: Any, code: str) -> None:
    w = TeamWorld()
    setup_task(w)
    w.apply(ANA, "create_member", {"requestId": "m3", "name": "Cy", "profile": "default"})
    w.apply(ANA, "form_team", {"requestId": "t2", "name": "solo", "members": ["Cy"]})
    assert refused(w, ANA, op, args) == code
    try:
        w.apply(ANA, op, args)
    except TeamError as e:
        assert "secret-profile" not in e.message and "Zed" not in e.message


def test_dispatch_only_to_a_member_of_the_task_team() -> None:
    w = TeamWorld()
    setup_task(w)
    w.apply(ANA, "create_member", {"requestId": "m3", "name": "Cy", "profile": "default"})
    assert refused(w, ANA, "assign_task", {"requestId": "a", "task": "ship",
                                           "member": "Cy"}) == "team_not_a_member"


STEPS = st.lists(st.sampled_from([
    ("create_member", {"name": "Ada", "profile": "default"}),
    ("create_member", {"name": "Bo", "profile": "default"}),
    ("form_team", {"name": "core", "members": ["Ada", "Bo"]}),
    ("create_task", {"team": "core", "title": "ship", "goal": "g"}),
    ("assign_task", {"task": "ship", "member": "Ada"}),
    ("review_task", {"task": "ship", "verdict": "approve"}),
    ("review_task", {"task": "ship", "verdict": "changes"}),
    ("complete_goal", {"task": "ship", "summary": "s"}),
]), max_size=12)


@settings(max_examples=60, derandomize=True, deadline=None)
@given(STEPS)
def test_replaying_the_successful_steps_with_their_request_ids_changes_nothing(
        steps: list[Any]) -> None:
    w = TeamWorld()
    done: list[tuple[str, dict[str, Any], dict[str, Any]]] = []
    for i, (op, args) in enumerate(steps):
        call = {**args, "requestId": f"r{i}"}
        try:
            done.append((op, call, w.apply(ANA, op, call)))
        except TeamError:
            pass
    snap, executed, reports = w.snapshot(), w.executions, len(w.outbox)
    for op, call, first in done:
        assert w.apply(ANA, op, call) == first
    assert w.snapshot() == snap and w.executions == executed and len(w.outbox) == reports
    assert w.replays == len(done)
