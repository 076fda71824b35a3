"""conformance.checks.translate: today's log shapes (fake_server Exchange, fixtures Effect) and
the coming ones (seq_out, cause, lifecycle entries) become facts; the join is exact or absent."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from conformance.checks import check
from conformance.checks.facts import UNKNOWN_FP, Fact, fact
from conformance.checks.invariants import BY_ID
from conformance.checks.translate import SequenceClash, translate
from fake_server.history import Exchange
from fixtures.hermes.effects import Effect


def ex(seq: int, route: str, body: Any = None, answer: Any = None, *, status: int | None = 200,
       inst: str = "i1", epoch: str = "E1", **kw: Any) -> Exchange:
    x = Exchange(seq=seq, time=0.0, route=route, method="GET" if route == "poll" else "POST",
                 runner_id="r1", instance=inst, request_epoch=None if route == "poll" else epoch,
                 reset=False, request_digest=None, request_body=body, epoch=epoch, status=status,
                 response_body=answer, **kw)
    return x


def poll(seq: int, *cmds: dict[str, Any], inst: str = "i1", epoch: str = "E1") -> Exchange:
    return ex(seq, "poll", answer={"epoch": epoch, "commands": list(cmds)}, inst=inst, epoch=epoch)


def cmd(cid: str, kind: str, **payload: Any) -> dict[str, Any]:
    return {"id": cid, "kind": kind, "payload": payload, "expiresAt": 1}


def admit(seq: int, cid: str, allowed: bool = True, **kw: Any) -> Exchange:
    return ex(seq, "admit", {"id": cid}, {"allowed": allowed}, **kw)


def result(seq: int, cid: str, res: Any = None, **kw: Any) -> Exchange:
    return ex(seq, "result", {"id": cid, "result": res if res is not None else {"ok": True}},
              {"ok": True}, **kw)


def eff(seq: int, kind: str, cause: Any = None, **kw: Any) -> SimpleNamespace:
    return SimpleNamespace(seq=seq, kind=kind, session_id=kw.pop("session_id", None),
                           stored_session_id=None, profile=kw.pop("profile", None),
                           socket_id=kw.pop("socket_id", None), time=0.0, detail=kw, cause=cause)


def http_cause(path: str, method: str = "GET") -> SimpleNamespace:
    return SimpleNamespace(transport="http", method=method, path=path, query={}, request_id=None,
                           socket_id=None, connection="127.0.0.1:5000")


def rpc_cause(method: str, socket: str = "ws1") -> SimpleNamespace:
    return SimpleNamespace(transport="rpc", method=method, path=None, query={}, request_id=3,
                           socket_id=socket, connection=None)


WS = SimpleNamespace(transport="ws", method=None, path=None, query={}, request_id=None,
                     socket_id="ws1", connection=None)
DL = "/api/files/download"


def by_kind(facts: list[Fact], kind: str) -> list[Fact]:
    return [f for f in facts if f.kind == kind]


def test_http_command_joins_its_file_read_effect() -> None:
    facts = translate(
        [poll(1, cmd("c1", "http", method="GET", path=DL, search="?profile=a&path=x")),
         admit(2, "c1"), result(4, "c1")],
        effects=[eff(3, "file.read", http_cause(DL), path="x")])
    [e] = by_kind(facts, "effect")
    assert (e.command_id, e.instance, e.profile, e.op) == ("c1", "i1", "a", "file.read")
    [d] = by_kind(facts, "deliver")
    assert d.op == "http" and d.fingerprint and d.raw == "history#1[0]"
    [a] = by_kind(facts, "admit")
    assert a.outcome == "granted" and a.epoch == "E1"
    assert check(facts).ok and not check(facts).unjoined


def test_effect_before_admit_is_flagged_on_translated_facts() -> None:
    facts = translate([poll(1, cmd("c1", "http", path=DL)), admit(3, "c1"), result(4, "c1")],
                      effects=[eff(2, "file.read", http_cause(DL))])
    [v] = check(facts).violations
    assert v.invariant_id == "INV-2" and v.seqs == [2, 3]


def test_todays_effect_without_cause_stays_unjoined() -> None:
    old = Effect(seq=3, kind="file.read", session_id=None, stored_session_id=None, profile=None,
                 socket_id=None, time=0.0, detail={"path": "x"})
    facts = translate([poll(1, cmd("c1", "http", path=DL)), admit(2, "c1")], effects=[old])
    report = check(facts)
    assert report.ok
    [u] = report.unjoined
    assert u.seq == 3 and u.reason == "no command's window and cause match"


def test_two_matching_commands_are_ambiguous_not_guessed() -> None:
    facts = translate([poll(1, cmd("c1", "http", path=DL), cmd("c2", "http", path=DL)),
                       admit(2, "c1"), admit(3, "c2")],
                      effects=[eff(4, "file.read", http_cause(DL))])
    [u] = check(facts).unjoined
    assert u.reason == "ambiguous: c1,c2"


def test_rpc_joins_through_the_channel_socket_and_owner_results() -> None:
    hist = [poll(1, cmd("c1", "gateway.open", connectionId="ch1")), admit(2, "c1"),
            result(4, "c1"),
            poll(5, cmd("c2", "gateway.rpc", connectionId="ch1", method="session.create",
                        params={"profile": "a"})),
            admit(6, "c2"), result(8, "c2", {"session_id": "s1"}),
            ex(9, "event", {"connectionId": "ch2", "frame": {"type": "message.delta",
                                                               "session_id": "s1"}}, {"ok": True})]
    effs = [eff(3, "ws.connected", WS, socket_id="ws1"),
            eff(7, "session.created", rpc_cause("session.create"), session_id="s1", profile="a"),
            eff(10, "turn.finished", rpc_cause("prompt.submit"), session_id="s1")]
    facts = translate(hist, effects=effs)
    e1, e2 = by_kind(facts, "effect")
    assert (e1.command_id, e2.command_id, e2.instance, e2.connection_id) == ("c1", "c2", "i1", "ch1")
    assert [f.seq for f in by_kind(facts, "consequence")] == [10]
    [v] = check(facts).violations
    assert v.invariant_id == "INV-4" and v.seqs == [8, 9]


def test_rpc_on_another_socket_is_not_joined() -> None:
    hist = [poll(1, cmd("c1", "gateway.open", connectionId="ch1")), admit(2, "c1"),
            result(4, "c1"), poll(5, cmd("c2", "gateway.rpc", connectionId="ch1", method="prompt.submit",
                                         params={"session_id": "s1"})), admit(6, "c2")]
    facts = translate(hist, effects=[eff(3, "ws.connected", WS, socket_id="ws1"),
                                     eff(7, "prompt.accepted", rpc_cause("prompt.submit", "ws9"))])
    assert [f.seq for f in check(facts).unjoined] == [7]


def test_a_late_effect_of_a_killed_instance_keeps_its_instance() -> None:
    hist = [poll(1, cmd("c1", "http", path=DL)), admit(2, "c1"),
            poll(5, cmd("c1", "http", path=DL), inst="i2", epoch="E2"),
            result(6, "c1", inst="i2", epoch="E2")]
    harness = [fact(3, "kill", instance="i1"), fact(4, "start", instance="i2")]
    facts = translate(hist, effects=[eff(7, "file.read", http_cause(DL))], harness=harness)
    [e] = by_kind(facts, "effect")
    assert e.command_id == "c1" and e.instance == "i1"  # i2's window closed at its result #6
    assert not [v for v in check(facts).violations if v.invariant_id == "INV-7"]


def test_close_result_gives_a_close_fact_and_later_events_violate() -> None:
    hist = [poll(1, cmd("c1", "gateway.close", connectionId="ch1")), admit(2, "c1"),
            result(3, "c1"),
            ex(4, "event", {"connectionId": "ch1", "frame": {"type": "message.delta"}}, None,
               status=410, code="runner_connection_closed"),
            ex(5, "event", {"connectionId": "ch1", "closed": True}, None, status=410)]
    facts = translate(hist)
    [c] = by_kind(facts, "close")
    assert (c.seq, c.connection_id) == (3, "ch1")
    ev = by_kind(facts, "event")
    assert [(f.op, f.outcome, f.reason) for f in ev] == [
        ("message.delta", "refused", "runner_connection_closed"), ("closed", "refused", None)]
    [v] = check(facts).violations
    assert v.invariant_id == "INV-8" and v.seqs == [3, 4]


def test_dropped_and_in_flight_admits() -> None:
    facts = translate([poll(1, cmd("c1", "http", path=DL), cmd("c2", "http", path="/x")),
                       admit(2, "c1", status=None, fault="drop"), admit(3, "c2", status=None)])
    a1, a2 = by_kind(facts, "admit")
    assert (a1.outcome, a1.indeterminate, a1.reason) == (None, False, "drop")
    assert (a2.outcome, a2.indeterminate) == (None, True)


def test_lifecycle_entries_and_epoch_dedupe() -> None:
    life = [SimpleNamespace(seq=2, kind="epoch_changed", detail={"epoch": "E1"}, reason=None,
                            connection_id=None, lease_id=None),
            SimpleNamespace(seq=4, kind="revoked", detail={"what": "channel"}, reason=None,
                            connection_id="ch1", lease_id=None),
            {"seq": 5, "kind": "revoked", "reason": "runner_disabled"},
            {"seq": 6, "kind": "instance_fenced", "detail": {"instance": "i0"}},
            {"seq": 7, "kind": "revoked", "detail": {"what": "profiles", "scope": "account",
                                                      "profiles": ["a"]}},
            {"seq": 8, "kind": "admitted", "command_id": "c1"}]
    facts = translate([poll(3)], life)
    assert [(f.seq, f.kind) for f in facts] == [
        (2, "epoch"), (3, "poll"), (4, "revoke"), (5, "disable"), (6, "fence"), (7, "revoke"),
        (7, "profiles")]
    assert facts[-1].profiles == frozenset({"a"}) and facts[-1].reason == "account"


def test_queued_entries_carry_account_and_profile_to_the_delivery() -> None:
    life = [{"seq": 1, "kind": "queued", "command_id": "c1",
             "detail": {"kind": "http", "account": "alice", "profile": "default"}},
            {"seq": 9, "kind": "revoked", "detail": {"what": "profiles", "account": "alice",
                                                      "profiles": ["b"]}}]
    hist = [{"seq": 2, "seq_out": 3, "route": "poll", "status": 200, "instance": "i1",
             "response_body": {"epoch": "E1", "commands": [cmd("c1", "http", path=DL)]}}]
    facts = translate(hist, life)
    (q,) = by_kind(facts, "queue")
    assert (q.command_id, q.account, q.profile, q.op) == ("c1", "alice", "default", "http")
    (d,) = by_kind(facts, "deliver")
    assert d.account == "alice"
    (p,) = by_kind(facts, "profiles")
    assert (p.reason, p.account, p.profiles) == ("account", "alice", frozenset({"b"}))


def test_json_dicts_and_seq_out_are_read() -> None:
    hist = [{"seq": 1, "seq_out": 2, "route": "poll", "status": 200, "instance": "i1",
             "response_body": {"epoch": "E1", "commands": [cmd("c1", "http", path=DL)]}},
            {"seq": 3, "seq_out": 5, "route": "admit", "status": 200, "instance": "i1",
             "request_epoch": "E1", "request_body": {"id": "c1"}, "response_body": {"allowed": True}}]
    effs = [{"seq": 4, "kind": "file.read", "cause": {"transport": "http", "method": "GET", "path": DL}}]
    facts = translate(hist, effects=effs)
    [a] = by_kind(facts, "admit")
    assert a.at_out == 5
    [v] = check(facts).violations  # the grant was made at #5, after the effect #4
    assert v.invariant_id == "INV-2" and v.seqs == [3, 4]


def test_logs_on_separate_counters_are_refused() -> None:
    with pytest.raises(SequenceClash):
        translate([poll(1)], effects=[eff(1, "file.read")])


def test_result_bodies_and_codes() -> None:
    hist = [poll(1, cmd("c1", "http", path=DL)),
            ex(2, "result", {"id": "c1", "error": {"code": "runner_command_uncertain",
                                                   "message": "m"}}, {"ok": True}),
            ex(3, "result", {"id": "c1", "error": {"message": "m"}}, {"ok": True})]
    r1, r2 = by_kind(translate(hist), "result")
    assert r1.code == "runner_command_uncertain" and r2.code == "runner_error"
    assert r1.body and '"code":"runner_command_uncertain"' in r1.body
    assert r1.fingerprint == r2.fingerprint


def test_before_gives_the_deliveries_still_open_as_carried_facts_only() -> None:
    """An earlier example's history: c1 answered there (not carried), c2 not (carried, with its
    delivery's epoch and instance), c3 answered by another instance only (carried for i1)."""
    before = [poll(1, cmd("c1", "http", path=DL), cmd("c2", "http", path=DL),
                   cmd("c3", "http", path=DL)),
              result(3, "c1"), result(4, "c3", inst="i2"),
              ex(5, "result", None, {"code": "runner_epoch_changed"}, status=409)]
    hist = [poll(10, epoch="E2"),
            ex(12, "result", None, {"code": "runner_epoch_changed"}, status=409)]
    facts = translate(hist, before=before)
    got = [(f.command_id, f.instance, f.epoch) for f in by_kind(facts, "carried")]
    assert got == [("c2", "i1", "E1"), ("c3", "i1", "E1")]
    assert not by_kind(facts, "deliver") and len(by_kind(facts, "result")) == 1
    assert check(facts).violations == []
    assert [v.invariant_id for v in check(translate(hist)).violations] == ["INV-11"]


def test_before_is_on_the_shared_sequence() -> None:
    with pytest.raises(SequenceClash):
        translate([poll(1)], harness=[fact(2, "kill")], before=[poll(2, cmd("c1", "http"))])


def test_a_result_answers_a_fingerprint_only_while_the_open_deliveries_share_one() -> None:
    """A slow runner answers the first payload after a second payload of the same id was
    delivered: that result could answer either, so it has no fingerprint (INV-6 does not judge
    it, and a correct idempotency_conflict after it is no "other answer"); once every delivery
    was answered, a redelivery of one payload is judged again."""
    a, b = cmd("c1", "http", path=DL), cmd("c1", "http", path=DL + "x")
    hist = [poll(1, a), poll(3, b),
            result(5, "c1", {"body": "first"}),
            ex(7, "result", {"id": "c1", "error": {"code": "idempotency_conflict", "message": "m"}},
               {"ok": True}),
            poll(9, b),
            ex(11, "result", {"id": "c1", "error": {"code": "idempotency_conflict", "message": "m"}},
               {"ok": True})]
    facts = translate(hist)
    r1, r2, r3 = by_kind(facts, "result")
    assert r1.fingerprint == r2.fingerprint == UNKNOWN_FP
    fp_b = by_kind(facts, "deliver")[1].fingerprint
    assert r3.fingerprint == fp_b
    assert BY_ID["INV-6"](facts) is None
    # a runner that answers a later payload from the ledger once the first was answered is judged
    hist = [poll(1, a), result(3, "c1", {"body": "first"}), poll(5, b),
            result(7, "c1", {"body": "first"})]
    facts = translate(hist)
    assert by_kind(facts, "result")[1].fingerprint == by_kind(facts, "deliver")[1].fingerprint
    assert BY_ID["INV-10"](facts) is not None
    # with one payload the window is determinate: another answer to a redelivery is a violation
    hist = [poll(1, a), result(3, "c1", {"body": "first"}), poll(5, a),
            result(7, "c1", {"body": "second"})]
    v = BY_ID["INV-6"](translate(hist))
    assert v is not None and v.seqs == [3, 7]
