"""What the acceptance scenario must leave behind, one function per rule of issue 12; the same
for both variants (``drive.Run`` in, ``AssertionError`` with the evidence out)."""
from __future__ import annotations

import json

from .drive import NATIVE_PREFIX, HermesSide, Run
from .scenario import EXPECTED, REPORT


def report(run: Run, side: HermesSide) -> str:
    line = (f"acceptance[{side.name}] hops: {json.dumps(run.hops)}\n"
            f"acceptance[{side.name}] timings: "
            f"{json.dumps({k: round(v, 2) for k, v in run.timings.items()})}")
    print("\n" + line)
    return line


def hops_agree(run: Run) -> None:
    e, hops = EXPECTED, run.hops
    assert hops["model_calls"] == e.model_calls, hops
    assert hops["plugin_forwarded"] == hops["runner_listener_answered"] == e.relayed, hops
    assert hops["control_plane_tool_route"] == e.relayed, hops
    assert hops["team_world_reached"] == hops["hub_lease_executions"] == e.reached_world, hops
    assert hops["team_world_executed"] == e.executed, hops
    stats = [a.grant.stats for a in run.admins.values()]
    assert sum(s.replayed for s in stats) == e.replayed, stats
    assert sum(s.refused for s in stats) == e.refused_by_world, stats


def lifecycle_and_report_back(run: Run, side: HermesSide) -> None:
    w, ana = run.desk.world, run.admins["ana"]
    assert sorted(w.members) == list(EXPECTED.members), w.snapshot()
    assert sorted(w.teams) == list(EXPECTED.teams), w.snapshot()
    ship, audit = w.tasks["ship"], w.tasks["audit"]
    assert (ship.state, ship.assignee, ship.origin.admin) == ("complete", "Ada", "ana")
    assert [r["by"] for r in ship.reviews] == ["ben"] and ship.summary == "v1 shipped"
    assert (audit.state, audit.assignee) == ("assigned", "Cy")
    # The report went into the session the task came from (ana's), not the completer's (ben's).
    assert len(run.desk.deliveries) == EXPECTED.reports
    text = run.desk.deliveries[0].report.text
    assert run.desk.deliveries[0].report.origin.session_id == ana.sid
    assert side.report_seen(ana.sid, text)
    assert text in run.transcripts["ana"] and text not in run.transcripts["ben"]
    assert run.texts["REPORT"] == REPORT.say


def repeated_request_id_creates_nothing_twice(run: Run) -> None:
    ana, w = run.admins["ana"], run.desk.world
    made = [ans for op, ans in ana.grant.answers if op == "create_member"]
    assert made[0] == made[1] and made[0]["member"]["name"] == "Ada"
    assert [m for m in w.members.values() if m.name == "Ada"] == [w.members["Ada"]]
    assert [entry for entry in w.log if entry[2] == "ana-m1"] == [("ana", "create_member",
                                                                    "ana-m1")]
    ben_results = json.dumps([ev["payload"].get("result")
                              for ev in run.admins["ben"].events("tool.complete")])
    assert "idempotency_conflict" in ben_results and "Cyd" not in w.members


def two_administrators_without_cross_talk(run: Run) -> None:
    ana, ben, w = run.admins["ana"], run.admins["ben"], run.desk.world
    names = {n: {ev["payload"]["name"] for ev in a.events("tool.start")
                 if str(ev["payload"].get("name", "")).startswith(NATIVE_PREFIX)}
             for n, a in run.admins.items()}
    for n, seen in names.items():
        assert seen and all(f"_{n}_" in x for x in seen), names
    assert not names["ana"] & names["ben"], names
    assert {t["id"] for t in ana.grant.tools}.isdisjoint(t["id"] for t in ben.grant.tools)
    assert {admin for admin, _, _ in w.log} == {"ana", "ben"}
    for admin, _, rid in w.log:  # each call landed in the grant of the session that made it
        assert rid.startswith(admin + "-"), w.log
    both = {m.created_by for m in w.members.values()}
    assert both == {"ana", "ben"}  # no lost update: both administrators' members are there


def revocation_stops_the_tools(run: Run) -> None:
    ben, w = run.admins["ben"], run.desk.world
    ben_results = json.dumps([ev["payload"].get("result") for ev in ben.events("tool.complete")])
    assert "team_grant_revoked" in ben_results and "runner_lease_expired" in ben_results
    assert not {"Dee", "Eve", "Fay"} & set(w.members)
    assert ben.grant.lease is not None and not ben.grant.lease.active
    assert w.log[-1][2] == "ben-c1"  # the last execution came before the revocation
