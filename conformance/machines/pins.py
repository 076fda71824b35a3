"""Pinned stories: the known-hard sequence of each family, run before its random examples.

Each pin replays an upstream anchor (``protocol-reference.md`` §8, tests/server/runner.test.ts
numbers below) or a fixed case as explicit machine steps, so every run of a family covers it
deterministically — not only when Hypothesis happens to draw it. A pin is a function of a fresh
machine (``state``) calling its rules in order, exactly like the steps Hypothesis prints; it is
judged at the machine's teardown like any example (``run.run_pins``).

Rules: a pin uses the family's own rules only (the same code the random examples run); a pin
that restarts the runner restarts it once; a pin leaves the world usable for the next example
(profiles it narrowed are widened again at its end).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Pin = Callable[[Any], None]


# -- permission: #10 (filters profiles, foreign profile refused), #13 / #19 (authorization change
# while queued / while the admit is pending → not admitted, Hermes never sees it)
def permission_outside_config(s: Any) -> None:
    s.change_runner_profiles({"default", "research", "other"})  # wider than the runner's config
    s.enqueue_for_profile(profile="other", account=None)
    s.enqueue_for_profile(profile="research", account="alice")
    s.change_runner_profiles({"default", "research"})


def permission_account_changes(s: Any) -> None:
    s.change_account_profiles({"research"})
    s.enqueue_for_profile(profile="default", account="alice")
    s.revoke_while_admit_pending()
    s.change_source_profiles({"default"})
    s.enqueue_for_profile(profile="research", account=None)
    s.change_source_profiles({"default", "research"})
    s.change_account_profiles({"default", "research"})
    s.revoke_account_authorization()
    s.enqueue_for_profile(profile="default", account="alice")


# -- dedupe: #14 (stored reply reused without a Hermes call; idempotency_conflict), DED-005
def dedupe_ledger(s: Any) -> None:
    w = s.enqueue_http(name="a.txt")
    s.replay_same(wire=w)
    s.replay_other_payload(wire=w)
    s.replay_same(wire=w)


def dedupe_refusal(s: Any) -> None:
    w = s.enqueue_refused(path="/api/secret", method="POST")
    s.replay_same(wire=w)


def dedupe_twice(s: Any) -> None:
    s.deliver_twice(mode="batch")
    w = s.deliver_twice(mode="next_poll")
    s.replay_same(wire=w)


# -- receipts: #14 (runner_command_uncertain for a started row), INC-004 (a completed receipt
# survives a kill), INC-005 (a retired row is answered uncertain, never run again)
def receipts_started_and_completed(s: Any) -> None:
    s.kill_started_and_completed()


def receipts_retired(s: Any) -> None:
    s.retire_and_replay()


# -- generations: #17 (a new epoch closes the obsolete gateways; new channels work), #16 (after
# disable nothing runs), a server restart between a command and its replay
def generations_epoch(s: Any) -> None:
    s.across_epoch(what="both")
    w = s.enqueue_http(name="a.txt")
    s.replay_same(wire=w)


def generations_server(s: Any) -> None:
    w = s.enqueue_http(name="a.txt")
    s.restart_server()
    s.replay_same(wire=w)


def generations_disable(s: Any) -> None:
    w = s.enqueue_http(name="a.txt")
    s.disable_runner()
    s.replay_same(wire=w)


# -- reconnection: #17 (a transport failure resets the epoch), REC-004 (a result whose post
# failed is answered from the ledger)
def reconnection_result(s: Any) -> None:
    w = s.fault_next_answer(route="result", fault="5xx")
    s.replay_same(wire=w)
    s.fault_next_answer(route="result", fault="drop")
    s.fault_next_answer(route="admit", fault="drop")


def reconnection_poll(s: Any) -> None:
    w = s.fault_next_poll(fault="5xx")
    s.replay_same(wire=w)


# -- cancel: #15 (a close overtaking the open leaves no channel), #20 (cancellation overtaking an
# admitted creation: no lease, a tombstone, no bind), CAN-004 / CAN-007 (late open / create of a
# closed id)
def cancel_channels(s: Any) -> None:
    s.close_overtakes_open()
    ch = s.open_channel()
    s.close_overtakes_admit(ch=ch)
    s.reopen_closed_channel(ch=ch)


def cancel_leases(s: Any) -> None:
    ch = s.open_channel()
    lease = s.create_lease(ch=ch)
    s.bind_lease(lease=lease)
    s.recreate_closed_lease(lease=lease)
    s.close_overtakes_create(ch=ch)
    other = s.create_lease(ch=ch)
    s.revoke_lease(lease=other)
    s.bind_lease(lease=other)


# -- isolation: #10 (forwards only owned session events), #18 (a closed channel cannot interrupt
# an unrelated connection)
def isolation_foreign(s: Any) -> None:
    a = s.channel_with_session()
    b = s.channel_with_session()
    s.prompt_on(a=a, b=b)
    s.prompt_on(a=b, b=b)
    s.revoke_one(a=a)
    s.prompt_on(a=b, b=b)


PINS: dict[str, dict[str, Pin]] = {
    "permission": {"outside the config set (#10)": permission_outside_config,
                   "account changes (#13, #19)": permission_account_changes},
    "dedupe": {"ledger reply and conflict (#14)": dedupe_ledger,
               "delivered twice (DED-005)": dedupe_twice,
               "a refusal is a stored reply (DED-008)": dedupe_refusal},
    "receipts": {"started row and completed receipt (#14, INC-004)":
                 receipts_started_and_completed,
                 "retired row (INC-005)": receipts_retired},
    "generations": {"channel and lease across an epoch (#17, GEN-001, GEN-002)":
                    generations_epoch,
                    "server restart": generations_server,
                    "disable (#16)": generations_disable},
    "reconnection": {"result post fails (REC-004)": reconnection_result,
                     "poll fails (#17)": reconnection_poll},
    "cancel": {"channels (#15, CAN-004)": cancel_channels,
               "leases (#20, CAN-007)": cancel_leases},
    "isolation": {"foreign session (#10, #18)": isolation_foreign},
}
