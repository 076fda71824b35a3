"""Reconnection cases (REC): every failure of the machine API ends in a reset poll, never in an
exit or a lost receipt."""

from __future__ import annotations

from typing import Any

from conformance.bounds import scaled
from conformance.marks import case
from conformance.verdict import expect
from conformance.witness import witness
from fake_server import Timings

from ._helpers_channels import (
    new_session,
    socket_of,
    ws_closed,
)
from ._helpers_reconnect import STATUS, end_hold, reset_poll_after, works
from ._helpers_state import (
    NOT_ADMITTED,
    WAIT,
    download,
    mark,
    new_id,
    reads,
    redeliver,
    reply_of,
    results_of,
    until,
    verdict,
    wait_route,
)


@case("REC-001", manual_clock=True)
async def test_5xx_poll_then_reset_poll(world: Any) -> None:
    """fails when: reset is sent only on the first poll (reset-only-first-poll), or a poll error
    is fatal (exits-on-poll-error)."""
    at = mark(world)
    world.cp.faults.fail_next("poll", status=503, code="service_unavailable")
    await end_hold(world, at)
    failed = await wait_route(world, "poll", lambda ex: ex.status == 503, after_seq=at, answered=True)
    await reset_poll_after(world, failed.seq, "a 503 poll")
    await works(world)


@case("REC-002", manual_clock=True)
async def test_dropped_poll_then_reset_poll(world: Any) -> None:
    """fails when: reset is sent only on the first poll (reset-only-first-poll), or a dropped
    connection is fatal (exits-on-poll-error). Two drops in a row: an HTTP client may retry an
    idempotent GET once on a dropped keep-alive connection (accepted)."""
    at = mark(world)
    world.cp.faults.drop_next("poll", n=2)
    await end_hold(world, at)
    dropped = await wait_route(world, "poll", lambda ex: ex.fault == "drop", after_seq=at)
    await reset_poll_after(world, dropped.seq, "a dropped poll")
    await works(world)


@case("REC-003", manual_clock=True)
async def test_slow_poll_answer_keeps_the_runner(world: Any) -> None:
    """fails when: the runner gives up on a slow poll answer (a short client timeout treated as
    fatal; exits-on-poll-error does not show it: a slow answer is no poll error)."""
    await world.cp.poll_held(world.runner_id)
    world.cp.faults.delay_next("poll", seconds=10.0)
    at = mark(world)
    await end_hold(world, at)
    await wait_route(world, "poll", after_seq=at)  # the delayed one
    due = world.cp.clock.now() + 9.0
    await until(lambda: any(t >= due for t in world.cp.clock.pending()), "the delayed poll sleeps")
    world.cp.clock.advance(10.0)  # the delayed poll goes through and is held
    expect(world.runner.running, expected="the runner keeps running", actual=f"exited {world.runner.returncode}")
    await works(world)


async def _failed_result_then_redelivery(world: Any, arm: str) -> None:
    payload, cid = download(world, f"{arm}.txt"), new_id()
    if arm == "fail":
        world.cp.faults.fail_next("result", status=503, code="service_unavailable", target=cid)
    else:
        world.cp.faults.drop_next("result", target=cid)
    handle = await world.cp.submit(world.runner_id, "http", payload, command_id=cid)
    first = await wait_route(world, "result", lambda ex: ex.command_id == cid and ex.fault is not None
                             and (ex.status is not None or ex.fault == "drop"))
    world.cp.clock.advance(world.cp.timings.redelivery + 0.1)
    out = await redeliver(world, handle)
    expect(out.ok and {"result": out.result} == reply_of(first),
           expected=f"after a {arm}ed result post the redelivery gets the same result",
           actual=f"{out.status} {out.code} {out.message or ''}",
           witness=witness(world, cid, effects=True))
    expect(reads(world, payload) == 1, expected="no new effect", actual=f"{reads(world, payload)} reads",
           witness=witness(world, cid, effects=True))


@case("REC-004", manual_clock=True)
async def test_failed_result_post_loses_no_receipt(world: Any) -> None:
    """fails when: a failed result post deletes the receipt (result-lost-on-5xx), or the claim
    upserts (claim-upserts)."""
    await _failed_result_then_redelivery(world, "fail")
    await _failed_result_then_redelivery(world, "drop")
    verdict(world)


@case("REC-005", manual_clock=True)
async def test_failed_admit_is_not_executed(world: Any) -> None:
    """fails when: the runner executes without a granted admit (skip-admit), or treats a failed
    admit as granted."""
    for arm in ("fail", "drop"):
        payload, cid = download(world, f"{arm}.txt"), new_id()
        if arm == "fail":
            world.cp.faults.fail_next("admit", status=503, code="service_unavailable", target=cid)
        else:
            world.cp.faults.drop_next("admit", target=cid)
        handle = await world.cp.submit(world.runner_id, "http", payload, command_id=cid)
        out = await redeliver(world, handle)
        expect(not out.ok, expected=f"a {arm}ed admit: an error result ({NOT_ADMITTED} expected)",
               actual=f"{out.status} {out.code}", witness=witness(world, cid, effects=True))
        expect(reads(world, payload) == 0, expected=f"a {arm}ed admit: not executed",
               actual=f"{reads(world, payload)} file.read effects",
               witness=witness(world, cid, effects=True))
    verdict(world, invariants=("INV-1", "INV-2"))


def _polls_in_the_gates(world: Any) -> int:
    """Polls of the runner the control plane received and neither parked nor answered yet."""
    open_polls = sum(1 for ex in world.cp.history.entries
                     if ex.route == "poll" and ex.runner_id == world.runner_id
                     and ex.status is None and ex.fault != "drop")
    return open_polls - (1 if world.cp.held_poll(world.runner_id) is not None else 0)


async def _reset_after_poll_errors(world: Any, since: int) -> None:
    """Every poll answered with an error after ``since`` (on the shared sequence) is followed
    by a reset poll (§2.8: a poll error sets reset); none answered so: nothing to reset."""
    failed = [ex for ex in world.cp.history.entries
              if ex.route == "poll" and ex.runner_id == world.runner_id and ex.status is not None
              and ex.status != 200 and (ex.seq_out or ex.seq) > since]
    if failed:
        await reset_poll_after(world, failed[0].seq_out or failed[0].seq,
                                f"a poll answered {failed[0].status} {failed[0].code}")


@case("REC-006", manual_clock=True)
async def test_instance_changed_on_a_route_resets(world: Any) -> None:
    """fails when: a 409 is fatal (exits-on-poll-error), the runner does not send a reset poll
    after its poll was answered 409 ``runner_instance_changed`` (reset-only-first-poll), or it
    executes the command whose admit met the lost state. The 409s are real: the control plane
    drops the runner's state (a watchdog expiry) while the command's admit is held.

    A poll the control plane has received is let out of its gates first (parked or answered:
    nothing of the runner's is awaited), so a runner that polls beside its admit always has its
    poll parked at the drop: it gets 409 and must reset. A runner that polls only after its
    admits (a correct choice) has no poll out at the drop: its next poll makes the new state and
    is answered 200 with the new epoch, with no error to reset for (§2.4: "the next poll returns
    a new epoch"). Either way the held admit gets 409 (``runner_instance_changed`` without a
    state, ``runner_epoch_changed`` after a new one), the command is not run, and the runner
    keeps working in the new epoch."""
    payload, cid = download(world), new_id()
    world.cp.faults.delay_next("admit", seconds=3600)
    handle = await world.cp.submit(world.runner_id, "http", payload, command_id=cid)
    held = await wait_route(world, "admit")  # the only one: the delay is untargeted (before the gates)
    await until(lambda: _polls_in_the_gates(world) == 0, "the runner's received poll parked or answered")
    drop = mark(world)
    await world.cp.force_watchdog(world.runner_id)
    world.cp.clock.advance(3600)
    refused = await wait_route(world, "admit", lambda ex: ex.seq == held.seq, answered=True)
    expect(refused.status == 409
           and refused.code in ("runner_instance_changed", "runner_epoch_changed"),
           expected="the held admit answered 409 runner_instance_changed (or "
                    "runner_epoch_changed, once a poll made a new state)",
           actual=f"{refused.status} {refused.code}", witness=witness(world, cid, effects=True))
    await _reset_after_poll_errors(world, drop)
    out = await redeliver(world, handle)
    expect(not out.ok and reads(world, payload) == 0,
           expected="the command whose admit got 409 is not executed",
           actual=f"{out.status} {out.code}; {reads(world, payload)} reads",
           witness=witness(world, cid, effects=True))
    expect(world.runner.running, expected="the runner keeps running", actual=f"exited {world.runner.returncode}")
    await works(world)
    await _reset_after_poll_errors(world, drop)  # a poll error seen only later must reset too


@case("REC-007", manual_clock=True)
async def test_epoch_changed_on_result_resets_and_ledger_answers(world: Any) -> None:
    """fails when: a refused result post deletes the receipt (result-lost-on-5xx), the claim
    upserts so the redelivery runs again (claim-upserts), or a 409 is fatal. The result post is
    refused 409 runner_epoch_changed and the control plane then drops the runner's state (a
    watchdog expiry), as it does when the epoch really changed."""
    payload, cid = download(world), new_id()
    world.cp.faults.fail_next("result", status=409, code="runner_epoch_changed", target=cid)
    handle = await world.cp.submit(world.runner_id, "http", payload, command_id=cid)
    refused = await wait_route(world, "result", lambda ex: ex.command_id == cid and ex.status == 409,
                               answered=True)
    await world.cp.force_watchdog(world.runner_id)
    await reset_poll_after(world, refused.seq, "409 runner_epoch_changed on result")
    out = await redeliver(world, handle)
    expect(out.ok and {"result": out.result} == reply_of(refused),
           expected="the redelivered command is answered from the ledger (same result)",
           actual=f"{out.status} {out.code} {out.message or ''}",
           witness=witness(world, cid, effects=True))
    expect(reads(world, payload) == 1, expected="no new effect", actual=f"{reads(world, payload)} reads",
           witness=witness(world, cid, effects=True))
    verdict(world)


@case("REC-008", manual_clock=True)
async def test_malformed_poll_answer_reconnects(world: Any) -> None:
    """fails when: the runner dies on a poll answer that is not a poll body
    (crash-on-malformed-poll, exits-on-poll-error). The answer is a 200 JSON object without
    ``epoch`` and ``commands`` (the control plane's fault answer with status 200)."""
    at = mark(world)
    world.cp.faults.fail_next("poll", status=200, code="not_a_poll_answer")
    await end_hold(world, at)
    bad = await wait_route(world, "poll", lambda ex: ex.fault == "fail", after_seq=at, answered=True)
    await reset_poll_after(world, bad.seq, "a malformed poll answer")
    await works(world)


@case("REC-009")
async def test_reconnect_is_not_a_hot_loop(world: Any) -> None:
    """fails when: the runner polls again at once after a failure (no-reconnect-delay).
    Reads the control plane's (system) clock at the arrival of three failed polls in a row: the
    runner's own pace, not the harness'; about 1 s is asked, a gap of at least 0.5 s is
    accepted."""
    at = mark(world)
    world.cp.faults.fail_next("poll", n=3, status=503, code="service_unavailable")
    handle = await world.cp.submit(world.runner_id, "http", STATUS)  # ends the held poll
    failed: list[Any] = []
    after = at
    for _ in range(3):
        ex = await wait_route(world, "poll", lambda e: e.fault == "fail", after_seq=after, answered=True,
                              timeout=15.0)
        failed.append(ex)
        after = ex.seq
    gaps = [round(b.time - a.time, 3) for a, b in zip(failed, failed[1:], strict=False)]
    expect(min(gaps) >= 0.5, expected="about 1 s between a failed poll and the next (≥ 0.5 s)",
           actual=f"gaps {gaps} s", witness=witness(world, routes=("poll",), effects=True))
    await reset_poll_after(world, after, "three 503 polls")
    await handle.wait(WAIT)


@case("REC-010", manual_clock=True)
async def test_service_updating_and_stopping_lose_nothing(world: Any) -> None:
    """fails when: a 503 during a deploy is fatal (exits-on-poll-error), or receipts are lost
    across the reconnect (ledger-in-memory does not show it; result-lost-on-5xx does not either:
    this case pins that the stored reply is still served)."""
    payload = download(world)
    first = await world.cp.submit(world.runner_id, "http", payload)
    out1 = await first.wait(WAIT)
    expect(out1.ok, expected="the download succeeds", actual=f"{out1.status} {out1.code}")
    at = mark(world)
    world.cp.faults.fail_next("poll", status=503, code="service_updating")
    world.cp.faults.fail_next("poll", status=503, code="service_stopping")
    await end_hold(world, at)
    last = await wait_route(world, "poll", lambda ex: ex.code == "service_stopping", after_seq=at,
                            answered=True, timeout=15.0)
    await reset_poll_after(world, last.seq, "503 service_updating / service_stopping")
    again = await world.cp.replay(world.runner_id, first.wire)
    out2 = await again.wait(WAIT)
    expect(out2.ok and out2.result == out1.result, expected="the stored reply survives the reconnect",
           actual=f"{out2.status} {out2.code}", witness=witness(world, first.id, effects=True))
    expect(reads(world, payload) == 1 and len(results_of(world, first.id)) == 2,
           expected="no new effect", actual=f"{reads(world, payload)} reads",
           witness=witness(world, first.id, effects=True))
    await works(world)


#: next poll after an answer: "within a few seconds" (§2.5); generous for a loaded machine
NEXT_POLL = 10.0


async def _first_poll(world: Any) -> Any:
    """A poll of the runner, open (held) or answered, within :data:`NEXT_POLL` (scaled); none
    while the runner runs: the case fails with how long the control plane has not seen it."""
    cp = world.cp
    try:
        return await world.runner.guard(cp.history.wait_for(
            lambda e: e.route == "poll" and e.runner_id == world.runner_id,
            timeout=NEXT_POLL + 1), "a poll", NEXT_POLL)
    except TimeoutError:
        slot = cp.hub.slots.get(world.runner_id)
        seen = slot.online.seen if slot is not None and slot.online is not None else None
        quiet = f"{cp.clock.now() - seen:.1f} s" if seen is not None else "ever (no online state)"
        expect(False, expected=f"a poll within {NEXT_POLL:.0f} s (scaled: {scaled(NEXT_POLL):.0f} "
                               "s; §2.5 asks for the next poll within a few seconds of an "
                               "answer, a poll hold here is 0.5 s)",
               actual=f"no poll open and none arrived; the control plane has not seen the runner "
                      f"for {quiet}; the runner still runs",
               witness=witness(world, last=6))
        raise


@case("REC-901", timings=Timings(poll_hold=0.5, redelivery=1.0))
async def test_next_poll_follows_the_answer(world: Any) -> None:
    """With a short poll hold, four idle poll answers in a row are each followed by the next
    poll within a few seconds (bounded wait, no timing assertion).

    fails when: the runner backs off while idle (waits tens of seconds after an empty answer)
    or polls only when it has work, so the control plane's 35 s watchdog takes it offline.
    A runner in such a back-off may have no poll out when the case begins (a kept world
    forgets the answered polls): then none within the bound, while the runner runs and the
    control plane last saw it that long ago, is the evidence."""
    cp = world.cp
    first = await _first_poll(world)
    answered = await cp.history.wait_for(lambda e: e.seq == first.seq and e.answered,
                                         timeout=WAIT, after_seq=first.seq - 1)
    for _ in range(4):
        prev = answered
        try:
            nxt = await cp.history.wait_for(lambda e, p=prev: e.route == "poll" and e.seq > p.seq,
                                            timeout=NEXT_POLL, after_seq=prev.seq)
        except TimeoutError:
            nxt = None
        expect(nxt is not None, expected=f"a poll within {NEXT_POLL:.0f} s of the answer to "
                                         f"poll #{prev.seq}", actual="none",
               witness=witness(world, after_seq=prev.seq - 1))
        assert nxt is not None
        answered = await cp.history.wait_for(
            lambda e, s=nxt.seq: e.route == "poll" and e.seq == s and e.answered,
            timeout=WAIT, after_seq=prev.seq)


@case("REC-902")
async def test_failed_event_post_disconnects(world: Any) -> None:
    """The control plane answers the runner's next event post 500; the runner must disconnect
    locally: the channel's Hermes socket closes and its next poll is a reset poll.

    fails when: the runner drops the frame and carries on (the channel stays open on a stale
    stream, frames lost without a reconnect)."""
    cp, rid = world.cp, world.runner_id
    ch = await cp.open_channel(rid)
    sid = await new_session(world, ch)
    sock = await socket_of(world, sid)
    mark = cp.history.last_seq
    cp.faults.fail_next("event", status=500, code="internal_error")
    # The failed post may be an event the turn sends before the runner posts the prompt's
    # result; the local disconnect it causes may then end the command runner_offline. Either
    # outcome is the runner's to choose: only the disconnect is judged here.
    await cp.rpc(ch, "prompt.submit", {"session_id": sid, "text": "hello"})
    failed = await world.runner.guard(cp.history.wait_for(
        lambda ex: ex.route == "event" and ex.fault == "fail" and ex.answered,
        timeout=WAIT + 1, after_seq=mark), "the failed event post", WAIT)
    try:
        reset = await cp.history.wait_for(lambda ex: ex.route == "poll" and ex.reset,
                                          timeout=WAIT, after_seq=failed.seq)
    except TimeoutError:
        reset = None
    expect(reset is not None, expected="a reset poll after the event post failed with 500",
           actual="no reset poll", witness=witness(world, after_seq=mark))
    closed = await ws_closed(world, sock)
    expect(closed is not None, expected="the channel's Hermes socket closes (local disconnect)",
           actual="still open", witness=witness(world, sid, "ws.closed"))
