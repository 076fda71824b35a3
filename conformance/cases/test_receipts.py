"""Incomplete-receipt cases (INC): a command the runner may have started is never run again
after a crash; a stored reply survives it."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator
from typing import Any

import pytest

from conformance.marks import case
from conformance.verdict import expect
from conformance.witness import witness

from ._helpers_process import state_dir
from ._helpers_state import (
    NOT_ADMITTED,
    UNCERTAIN,
    WAIT,
    Harness,
    download,
    kill_on_effect,
    new_id,
    open_session,
    prompt_effects,
    reads,
    redeliver,
    reply_of,
    results_of,
    verdict,
    wait_route,
)
from ._helpers_wire import describe, http, posted_code


async def _crash_and_start(world: Any, h: Harness, point: str, cid: str, *,
                           follow_clock: bool = False) -> None:
    """Kill -9 now (unless already dead), record the kill and the start, start again."""
    h.kill(point, command_id=cid)
    await world.runner.kill()
    h.start()
    await world.start_runner(follow_clock=follow_clock)
    h.started()




@case("INC-001", fresh=True)  # arms a kill on its own file.read: a runner of its own
async def test_kill_inside_hermes_http_is_uncertain(world: Any) -> None:
    """fails when: a started row runs again after the restart (rerun-started-rows), the ledger is
    in memory (ledger-in-memory), or the claim upserts (claim-upserts)."""
    h = Harness(world)
    payload = download(world)
    fired = kill_on_effect(world, "file.read")
    handle = await world.cp.submit(world.runner_id, "http", payload)
    await world.runner.wait(WAIT)
    expect(fired, expected="the runner was killed while Hermes served the request", actual="no")
    await _crash_and_start(world, h, "during_hermes", handle.id)
    out = await redeliver(world, handle)
    expect(out.code == UNCERTAIN, expected=f"the redelivery after the restart: {UNCERTAIN}",
           actual=f"{out.status} {out.code} {out.message or ''}",
           witness=witness(world, handle.id, effects=True))
    expect(reads(world, payload) == 1, expected="never executed again (one file.read, the killed one)",
           actual=f"{reads(world, payload)} file.read effects",
           witness=witness(world, handle.id, effects=True))
    verdict(world, h)


@case("INC-002", manual_clock=True)
async def test_kill_while_admit_held_is_uncertain(world: Any) -> None:
    """fails when: a started row runs again after the restart (rerun-started-rows), or the row is
    written only after admit."""
    h = Harness(world)
    payload = download(world)
    cid = new_id()
    world.cp.faults.delay_next("admit", seconds=3600, target=cid)
    handle = await world.cp.submit(world.runner_id, "http", payload, command_id=cid)
    await wait_route(world, "admit", lambda ex: ex.command_id == handle.id)
    await _crash_and_start(world, h, "admit_held", handle.id)
    out = await redeliver(world, handle)
    expect(out.code == UNCERTAIN, expected=f"the redelivery after the restart: {UNCERTAIN}",
           actual=f"{out.status} {out.code} {out.message or ''}",
           witness=witness(world, handle.id, effects=True))
    expect(reads(world, payload) == 0, expected="no effect", actual=f"{reads(world, payload)} reads",
           witness=witness(world, handle.id, effects=True))
    verdict(world, h)


@case("INC-003")
async def test_kill_during_prompt_submit_is_uncertain(world: Any) -> None:
    """fails when: a started row runs again after the restart (rerun-started-rows)."""
    h = Harness(world)
    ch, sid = await open_session(world)
    pause = world.hermes.pause_at("before prompt.accept", session_id=sid)
    handle = await world.cp.submit_rpc(ch, "prompt.submit", {"session_id": sid, "text": "hello"})
    await pause.reached(timeout=WAIT)
    h.add("held", command_id=handle.id, session_id=sid)
    await _crash_and_start(world, h, "during_hermes", handle.id)
    pause.release()
    out = await redeliver(world, handle)
    expect(out.code == UNCERTAIN, expected=f"the redelivery after the restart: {UNCERTAIN}",
           actual=f"{out.status} {out.code} {out.message or ''}",
           witness=witness(world, handle.id, effects=True))
    n = len(prompt_effects(world, sid))
    expect(n <= 1, expected="one prompt effect at most", actual=f"{n} prompt effects",
           witness=witness(world, handle.id, effects=True))
    verdict(world, h)


@case("INC-004", manual_clock=True)
async def test_kill_while_result_held_keeps_the_reply(world: Any) -> None:
    """fails when: receipts are written behind the result post (write-behind-receipts), or the
    ledger is in memory (ledger-in-memory)."""
    h = Harness(world)
    payload = download(world)
    cid = new_id()
    world.cp.faults.delay_next("result", seconds=3600, target=cid)
    handle = await world.cp.submit(world.runner_id, "http", payload, command_id=cid)
    held = await wait_route(world, "result", lambda ex: ex.command_id == handle.id
                            and ex.request_body is not None)
    await _crash_and_start(world, h, "result_held", handle.id)
    out = await redeliver(world, handle)
    expect(out.ok and {"result": out.result} == reply_of(held),
           expected="the redelivery after the restart gets the reply posted before the kill",
           actual=f"{out.status} {out.code} {out.message or ''}",
           witness=witness(world, handle.id, effects=True))
    expect(reads(world, payload) == 1, expected="no new effect", actual=f"{reads(world, payload)} reads",
           witness=witness(world, handle.id, effects=True))
    verdict(world, h)


@case("INC-005", manual_clock=True)
async def test_row_older_than_an_hour_is_retired(world: Any) -> None:
    """fails when: retirement deletes rows (retire-deletes-rows: the id looks new and runs again),
    or the runner keeps and replays hour-old receipts forever (no retirement)."""
    h = Harness(world)
    payload = download(world)
    handle = await world.cp.submit(world.runner_id, "http", payload)
    out1 = await handle.wait(WAIT)
    expect(out1.ok, expected="the download succeeds", actual=f"{out1.status} {out1.code}")
    world.cp.clock.advance(3600 + 60)
    h.add("retire")
    h.kill("stop")
    await world.runner.stop()
    h.start()
    await world.start_runner(follow_clock=True)
    h.started()
    out = await redeliver(world, handle)
    expect(out.code == UNCERTAIN, expected=f"the retired id: {UNCERTAIN}",
           actual=f"{out.status} {out.code} {out.message or ''}",
           witness=witness(world, handle.id, effects=True))
    expect(reads(world, payload) == 1, expected="never run again", actual=f"{reads(world, payload)} reads",
           witness=witness(world, handle.id, effects=True))
    verdict(world, h)


@case("INC-006", manual_clock=True)
async def test_refusal_is_stored_before_it_is_posted(world: Any) -> None:
    """fails when: refusals are not stored (refusals-not-stored), or receipts are written behind
    the result post (write-behind-receipts)."""
    h = Harness(world)
    payload = download(world)
    world.cp.faults.fail_next("admit", status=503, code="service_unavailable")
    cid = new_id()
    world.cp.faults.delay_next("result", seconds=3600, target=cid)
    handle = await world.cp.submit(world.runner_id, "http", payload, command_id=cid)
    held = await wait_route(world, "result", lambda ex: ex.command_id == handle.id
                            and ex.request_body is not None)
    expect((reply_of(held).get("error") or {}).get("code") == NOT_ADMITTED,
           expected=f"the refusal after a failed admit: {NOT_ADMITTED}", actual=str(reply_of(held)),
           witness=witness(world, handle.id, effects=True))
    await _crash_and_start(world, h, "result_held", handle.id)
    out = await redeliver(world, handle)
    posted = results_of(world, handle.id)
    expect(out.code == NOT_ADMITTED and reply_of(posted[-1]) == reply_of(held),
           expected="the redelivery after the restart gets the same refusal",
           actual=f"{out.status} {out.code} {out.message or ''}",
           witness=witness(world, handle.id, effects=True))
    expect(reads(world, payload) == 0, expected="no effect", actual=f"{reads(world, payload)} reads",
           witness=witness(world, handle.id, effects=True))
    verdict(world, h)


#: A ledger that cannot be used is made from outside: where the state directory holds the
#: upstream-recommended SQLite ledger ``runner-commands.sqlite3`` (§4), the harness holds its
#: write lock (``BEGIN EXCLUSIVE`` on its own connection), so the runner's claim of a new command
#: (its lookup and its ``started`` row) fails. The file name, schema and encoding are an
#: implementation choice (§4), so a runner that keeps its ledger elsewhere cannot be judged this
#: way: the cases are not-applicable to it (never failed; the positive control
#: ``other-ledger-file`` pins this).
LEDGER = "runner-commands.sqlite3"


LOCKED_WAIT = 15.0


@contextlib.contextmanager
def _ledger_locked(world: Any) -> Iterator[None]:
    path = state_dir(world.runner) / LEDGER
    if not path.is_file():   # never create it: connect() would make an empty file
        pytest.skip(f"not-applicable: the state directory holds no {LEDGER} (the ledger's "
                    "file name is an implementation choice, §4), so it cannot be locked")
    conn = sqlite3.connect(str(path), timeout=5.0, isolation_level=None)
    try:
        conn.execute("BEGIN EXCLUSIVE")
        yield
    finally:
        with contextlib.suppress(sqlite3.Error):
            conn.execute("ROLLBACK")
        conn.close()


async def _result_while_locked(world: Any) -> tuple[dict[str, Any], Any]:
    """A download submitted while the ledger is locked, and its result post (None when the
    runner posted none within the bound: it waits for the lock)."""
    _, out = await http(world, "/api/status", profile=None)   # the ledger exists and is in use
    expect(out.ok, expected="GET /api/status relayed", actual=describe(out))
    payload = download(world, "locked.txt")
    with _ledger_locked(world):
        handle = await world.cp.submit(world.runner_id, "http", payload)
        try:
            ex = await world.cp.history.wait_for(
                lambda e: e.route == "result" and e.command_id == handle.id and e.answered,
                timeout=LOCKED_WAIT)
        except TimeoutError:
            ex = None
    return payload, ex


@case("INC-901")
async def test_unclaimable_command_is_not_executed(world: Any) -> None:
    """The harness holds the ledger's write lock; a download delivered then must not reach
    Hermes (its result, if posted while the lock is held, is an error).

    fails when: the runner treats a ledger failure as "no row" and executes the command without
    a durable started row (a crash then replays it: double execution)."""
    payload, ex = await _result_while_locked(world)
    if ex is None:
        return   # it waits for the lock: the lookup did not fail, nothing to judge
    expect(posted_code(ex) is not None, expected="an error result while the ledger is locked",
           actual=str(ex.request_body)[:200])
    expect(reads(world, payload) == 0, expected="no Hermes read of an unclaimed command",
           actual=f"{reads(world, payload)} file.read effect(s)")


@case("INC-902")
async def test_unclaimable_command_is_uncertain(world: Any) -> None:
    """The harness holds the ledger's write lock; the download delivered then is answered
    runner_command_uncertain ("original command needs reconciliation").

    fails when: the runner answers another code (runner_error), or waits for the lock until
    the control plane's deadline."""
    _, ex = await _result_while_locked(world)
    code = posted_code(ex) if ex is not None else None
    expect(code == "runner_command_uncertain",
           expected="runner_command_uncertain while the ledger is locked",
           actual=code or ("no result within 15 s" if ex is None else "a result"))
