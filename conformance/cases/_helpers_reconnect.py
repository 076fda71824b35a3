"""Helpers of the reconnection cases: end a held poll, await the reset poll that must follow a
failure, and prove a runner that stopped polling.

Rules:
- Every wait on the runner goes through ``world.runner.guard``: a runner that exits while the
  case waits is failed (``RunnerExited``), never left to a wait that runs out.
- When a wait for a poll runs out, the history is read before giving up: a runner whose last
  poll is one the control plane failed, with none after it within the bound (ten times the
  protocol's reconnect delay), is failed with that poll (:func:`expect_polling`).
"""

from __future__ import annotations

from typing import Any

from conformance.bounds import scaled
from conformance.verdict import expect
from conformance.witness import witness

from ._helpers_state import WAIT, until

STATUS = {"method": "GET", "path": "/api/status", "search": ""}


#: the reconnect delay after a failed poll (§2.8, §10 timings: 1 s); the bounds below are
#: :data:`WAIT` (10 s, scaled), ten times it
RECONNECT_DELAY = 1.0


async def end_hold(world: Any, since: int) -> None:
    """Answer the poll the control plane holds now (its hold ends on the manual clock). Awaited
    through the runner: a fault armed (after ``since``) before this may meet a poll already on
    its way, so a runner that dies of it is failed (``RunnerExited``, its exit code and last
    output), and one that lives on but polls no more is failed with the failed poll as witness
    (:func:`expect_polling`), not left to a wait that runs out."""
    try:
        await world.runner.guard(world.cp.poll_held(world.runner_id, timeout=WAIT + 1),
                                 "a held poll", WAIT)
    except TimeoutError:
        expect_polling(world, since)
        raise
    world.cp.clock.advance(world.cp.timings.poll_hold + 0.1)


def expect_polling(world: Any, since: int) -> None:
    """After a wait for a poll ran out: when the runner's last poll after ``since`` is one the
    control plane failed (an injected fault) and none came after it, the runner stopped polling
    — fail with that poll; otherwise return (nothing to judge, the caller re-raises)."""
    polls = [ex for ex in world.cp.history.entries
             if ex.route == "poll" and ex.runner_id == world.runner_id and ex.seq > since]
    if not polls or polls[-1].fault is None or not (polls[-1].answered or polls[-1].fault == "drop"):
        return
    last = polls[-1]
    expect(False, expected=f"a poll again within {WAIT:.0f} s (scaled) of the failed poll "
                           f"#{last.seq} (§2.8: reconnect after {RECONNECT_DELAY:.0f} s)",
           actual=f"no poll since #{last.seq} ({last.fault} {last.status} {last.code or ''}); "
                  "the runner still runs", witness=witness(world, routes=("poll",), effects=True))


async def reset_poll_after(world: Any, seq: int, what: str) -> Any:
    """The first poll answered 200 after ``seq``; it must carry x-runner-reset: 1.

    These cases drive the control plane's clock, so a poll it holds (one that finds nothing to
    deliver) is answered only when its hold ends on that clock: while no poll after ``seq`` has
    been answered 200, a held one gets its hold ended. (Without that, a reset poll that came
    before the command was due again waited out the whole bound: REC-006, about one run in six
    under load.)"""

    def accepted_else_end_hold() -> Any:
        found = next((ex for ex in world.cp.history.entries
                      if ex.route == "poll" and ex.seq > seq and ex.status == 200), None)
        if found is None and world.cp.held_poll(world.runner_id) is not None:
            world.cp.clock.advance(world.cp.timings.poll_hold + 0.1)
        return found

    try:
        ok = await world.runner.guard(until(accepted_else_end_hold, "a poll answered 200",
                                            scaled(WAIT + 2)),   # the guard's bound rules
                                      "a poll answered 200", WAIT + 1)
    except TimeoutError:
        expect_polling(world, seq - 1)
        raise
    expect(ok.reset, expected=f"after {what} the next accepted poll carries x-runner-reset: 1",
           actual="reset header missing", witness=witness(world, routes=("poll",), effects=True))
    expect(world.runner.running, expected="the runner keeps running", actual=f"exited {world.runner.returncode}")
    return ok


async def works(world: Any) -> None:
    out = await world.cp.command(world.runner_id, "http", STATUS)
    expect(out.ok, expected="a command after the reconnect works", actual=f"{out.status} {out.code}",
           witness=witness(world, routes=("poll", "admit", "result"), effects=True))
