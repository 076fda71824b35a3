"""The lifecycle table and the validity rows, sans-IO: the tables are what runs."""

from __future__ import annotations

from dataclasses import replace

from fake_server.lifecycle import RESULT_WITHOUT_ADMIT, Event, Lifecycle, State, outcome_from_result
from fake_server.validity import (
    ENQUEUE_RULES,
    AdmitFacts,
    ChannelFacts,
    EnqueueFacts,
    ScopeFacts,
    admit_refusal,
    channel_refusal,
    enqueue_refusal,
)


def test_admit_then_result_and_result_without_admit() -> None:
    lc = Lifecycle()
    assert lc.apply(Event.DELIVER).target is State.DELIVERED
    assert lc.apply(Event.ADMIT_REFUSED).target is State.DELIVERED
    assert lc.apply(Event.ADMIT).target is State.ADMITTED
    step = lc.apply(Event.RESULT)
    assert step.target is State.ENDED and step.note == ""
    late = lc.apply(Event.RESULT)
    assert not late.applied and late.note == "result ignored: command ended"
    blind = Lifecycle()
    blind.apply(Event.DELIVER)
    step = blind.apply(Event.RESULT)
    assert step.applied and step.note == RESULT_WITHOUT_ADMIT


SCOPE = ScopeFacts("alice", 1, True, True, 1, "work", frozenset({"work"}))
ADMIT = AdmitFacts(True, False, 0, 10, True, "gateway.rpc", False, True, None, False, SCOPE)


def test_admit_reasons() -> None:
    assert admit_refusal(ADMIT) is None
    cases = {
        "expired": replace(ADMIT, now_ms=10),
        "command ended": replace(ADMIT, ended=True),
        "runner disabled": replace(ADMIT, runner_enabled=False),
        "channel closed": replace(ADMIT, channel_present=False),
        "channel not valid: channel revoked": replace(ADMIT, channel_refusal="channel revoked"),
        "authorization_version moved": replace(ADMIT, scope=replace(SCOPE, account_version=2)),
        "account inactive": replace(ADMIT, scope=replace(SCOPE, account_active=False)),
        "lease not active": replace(ADMIT, kind="lease.bind"),
    }
    for reason, facts in cases.items():
        assert admit_refusal(facts) == reason
    # stop methods are exempt from channel validity and scope, not from a missing channel
    stop = replace(ADMIT, stop_method=True, channel_refusal="channel revoked",
                   scope=replace(SCOPE, account_version=9))
    assert admit_refusal(stop) is None
    assert admit_refusal(replace(stop, channel_present=False)) == "channel closed"
    # the profile is re-checked only when the facts ask for it (Extras.admit_checks_profile)
    gone = replace(SCOPE, effective=frozenset())
    assert admit_refusal(replace(ADMIT, scope=replace(gone, check_profile=False))) is None
    assert admit_refusal(replace(ADMIT, scope=gone)) == "profile not effective"


def test_channel_reasons() -> None:
    ok = ChannelFacts(False, False, True, True, SCOPE)
    assert channel_refusal(ok) is None
    assert channel_refusal(replace(ok, revoked=True)) == "channel revoked"
    assert channel_refusal(replace(ok, registered=False)) == "channel not registered"
    assert channel_refusal(replace(ok, scope=replace(SCOPE, effective=frozenset()))) == "profile not effective"


def test_enqueue_order_is_upstreams_for_the_queue() -> None:
    ok = EnqueueFacts(None, True, None, None, True, None, 0, 64, 10, 100, 0, 1000)
    assert enqueue_refusal(ok) is None
    # the 65th command that is also too large: upstream answers 429 (pending before size)
    both = replace(ok, pending=64, size=101)
    rule = enqueue_refusal(both)
    assert rule is not None and (rule.status, rule.code) == (429, "runner_busy")
    assert [r.reason for r in ENQUEUE_RULES][2:] == [
        "runner offline", "channel not valid", "too many pending commands", "command too large",
        "queue bytes full"]


def test_result_outcomes_as_upstream() -> None:
    assert outcome_from_result({"id": "x", "error": "boom"}).code == "runner_error"
    assert outcome_from_result({"id": "x", "error": {"code": ""}}).code == ""
    assert outcome_from_result({"id": "x", "error": None, "result": 1}).result == 1
    assert len(outcome_from_result({"error": {"message": "\U0001F600" * 600}}).message or "") == 500
