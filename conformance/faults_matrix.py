"""The fault matrix, enumerated (not sampled): every cell is one scripted story on a rig.

Rules:
- Every cell is judged by the history checker over the facts of that cell alone, on the rig
  that ran it (:func:`run_cell`); a rig runs cells one after another.
- A row runs on :func:`lanes` rigs at once (:data:`LANES`, :func:`run_row`,
  :mod:`.machines.lanes`): the cells of the order given are dealt round-robin, the first lane
  runs on the caller's rig (the kept one), each other lane on a rig of the same options opened
  for the row and closed after it. The outcomes come back in the order given.

Rows of the matrix (``CELLS``):
- ``kill``: kill -9 at each point of ``actions.KILL_POINTS`` × kinds (http, a gateway prompt,
  lease.create); restart; replay the command → 0 double executions, 0 lost receipts (a
  completed command is answered from the ledger, an unfinished one ``runner_command_uncertain``).
- ``server``: a server restart at each of those points → 0 stale results accepted; the
  replayed command is never executed twice.
- ``route``: a dropped, a 5xx and a slow answer on each machine route a command crosses
  (poll, admit, result) → the runner reconnects (a reset poll after a poll error), the command
  completes once, nothing lost.
- ``deadline``: the command's deadline expires (server clock) while it stands at each point →
  504 on the caller, never executed after it.
- ``retire``: a completed receipt aged one hour (server clock + ``faketime`` for the runner) is
  answered ``runner_command_uncertain`` and never run again.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Sequence
from typing import Any

from .checks import Violation
from .checks.render import render
from .machines import actions
from .machines.actions import KINDS, POINTS, UNREACHABLE
from .machines.lanes import run_lanes
from .machines.rig import WAIT, Rig, within

ROUTES = ("poll", "admit", "result")
ROUTE_FAULTS = ("drop", "5xx", "slow")
UNCERTAIN = "runner_command_uncertain"


@dataclasses.dataclass(frozen=True)
class Cell:
    row: str  # kill | server | route | deadline | retire
    kind: str
    point: str

    @property
    def id(self) -> str:
        return f"{self.row}-{self.kind}-{self.point}"


CELLS: tuple[Cell, ...] = (
    *(Cell("kill", k, p) for k in KINDS for p in POINTS if (k, p) not in UNREACHABLE),
    *(Cell("server", k, p) for k in KINDS for p in POINTS if (k, p) not in UNREACHABLE),
    *(Cell("route", "http", f"{r}:{f}") for r in ROUTES for f in ROUTE_FAULTS),
    *(Cell("deadline", "http", p) for p in ("queued", "after_started", "before_result_post")),
    Cell("retire", "http", "one_hour"),
)


def cells(row: str) -> list[Cell]:
    return [c for c in CELLS if c.row == row]


#: How many rigs run a row's cells at once (a row not named here: one, the kept rig).
#: ``server``: a cell waits mostly on the runner's own 1 s pause before it reconnects after the
#: control-plane restart, idle time that lanes overlap (FLT-002, the long pole of a certify
#: run: about 19 s on one rig). ``kill``: a cell waits mostly on a runner start-up, which is CPU
#: on a machine of two shared cores, so lanes gain less there. Three at most: each lane is a
#: world start (a runner start-up) and a runner process more, and the contention they add eats
#: into the cells' bounded waits (scaled, and generous, but the harness must never fail a
#: correct runner for its own load). The route, deadline and retire rows take about 2 s or
#: less on one rig, less than an extra world start would save. A control-plane restart gives
#: up its port and binds it again: the port is one no port-0 bind or outgoing connection can
#: take meanwhile (:func:`fake_server.ports.stable_ports`; before it, a lane starting a world
#: took it once: ``EADDRINUSE``, 6 cells not judged in CI).
LANES: dict[str, int] = {"server": 3, "kill": 3}


def lanes(row: str) -> int:
    """The lanes of ``row``: its :data:`LANES` entry (else 1), never more than its cells."""
    return max(1, min(LANES.get(row, 1), len(cells(row))))


class CellFailed(AssertionError):
    def __init__(self, cell: Cell, message: str, violation: Violation | None = None) -> None:
        super().__init__(message)
        self.cell, self.violation = cell, violation


async def _kill(rig: Rig, cell: Cell) -> None:
    cid = actions.new_id()
    handle = await actions.reach(rig, cell.kind, cell.point, cid)
    await actions.kill(rig, cell.point, cid)
    rig.world.cp.faults.clear()
    rig.world.hermes.release_all()
    await actions.start(rig)
    out = await actions.replay(rig, handle.wire)
    if cell.point in ("after_delivery",) or out.ok or out.code in (UNCERTAIN, "runner_command_not_admitted"):
        return
    raise CellFailed(cell, f"replay after kill at {cell.point}: {out}")


async def _server(rig: Rig, cell: Cell) -> None:
    cid = actions.new_id()
    handle = await actions.reach(rig, cell.kind, cell.point, cid)
    await actions.restart_server(rig)
    rig.world.cp.faults.clear()
    if cell.kind != "http":  # channels die with the epoch: the replay is refused or uncertain
        return
    await actions.replay(rig, handle.wire)


async def _route(rig: Rig, cell: Cell) -> None:
    w = rig.world
    route, fault = cell.point.split(":")
    cid = actions.new_id()
    target = None if route == "poll" else cid
    before = w.cp.history.last_seq
    if fault == "drop":
        w.cp.faults.drop_next(route, target=target)
    elif fault == "5xx":
        w.cp.faults.fail_next(route, status=503, target=target)
    else:
        w.cp.faults.delay_next(route, seconds=w.timings.poll_hold + 1, target=target)
    handle = await actions.http(rig, command_id=cid, wait=False)
    try:
        out = await actions.settle_handle(rig, handle)
    except TimeoutError:
        raise CellFailed(cell, f"{cid} never answered after a {fault} {route} answer") from None
    again = await actions.replay(rig, handle.wire)  # answered from the ledger or run once
    if out.ok and not again.ok:
        raise CellFailed(cell, f"{cid}: completed, then its receipt was lost: {again}")
    if route == "poll" and fault != "slow":
        # A 5xx is an error the runner sees: a reset poll must follow. A dropped connection may
        # be retried by the runner's HTTP client before the runner sees it (aiohttp retries an
        # idempotent GET on a reused connection): then a later answered poll is the reconnection.
        def reconnected(ex: Any) -> bool:
            return (ex.seq > before and ex.route == "poll"
                    and (bool(ex.reset) or (fault == "drop" and ex.status == 200
                                            and ex.seq > _dropped(w, before))))

        try:  # the poll error may hit the poll after the command: await it, bounded
            await w.cp.history.wait_for(reconnected, timeout=WAIT)
        except TimeoutError:
            raise CellFailed(cell, f"no reset poll after a {fault} poll answer") from None
        await w.runner.wait_online(w.cp, w.runner_id, WAIT) if w.runner else None


def _dropped(w: Any, before: int) -> int:
    drops = [ex.seq for ex in w.cp.history.entries
             if ex.seq > before and ex.route == "poll" and ex.fault == "drop"]
    return drops[0] if drops else 1 << 62


#: The deadline of the command the ``queued`` cell submits (short: the runner is not seen while
#: its poll is held, so the clock must stay well inside the watchdog's ``offline_after``).
QUEUED_DEADLINE = 5.0


async def _deadline(rig: Rig, cell: Cell) -> None:
    """The command's deadline passes (server clock) while it stands at ``cell.point``.

    Every hold is released by the same clock move that passes the deadline (the hold ends just
    after it), so nothing is left held for the next cell: a poll held past the cell would keep
    the runner from ever polling again (that was the FLT-004 hang under CI)."""
    w = rig.world
    assert w.clock is not None and w.runner_id is not None
    cid = actions.new_id()
    rid = w.runner_id
    released: Awaitable[Any]
    if cell.point == "queued":
        handle, parked = await _queued_behind_a_held_poll(rig, cid)
        w.clock.advance(QUEUED_DEADLINE + 3)  # the deadline (+5), then the poll's hold (+7)
        released = within("the held poll to be released and the runner's poll parked again",
                          w.cp.poll_held(rid, other_than=parked, timeout=WAIT + 1))
    else:
        deadline = w.timings.command_deadline
        handle = await actions.reach(rig, "http", cell.point, cid, hold=deadline + 1.5)
        route = actions.KILL_POINTS[cell.point][5:]
        held = [ex for ex in w.cp.history.entries if ex.route == route and ex.command_id == cid]
        w.clock.advance(deadline + 2)  # the deadline, then the held request's release
        released = within(f"the held {route} of {cid} to be answered", w.cp.history.wait_for(
            lambda ex: ex.seq == held[0].seq and ex.status is not None, timeout=None,
            after_seq=held[0].seq - 1))
    out = await within(f"the outcome of {cid} after its deadline", handle.wait(WAIT + 1))
    await released  # nothing of this cell stays held into the next one
    if out.ok:
        raise CellFailed(cell, f"{cid} was accepted after its deadline: {out}")
    w.cp.faults.clear()


async def _queued_behind_a_held_poll(rig: Rig, cid: str) -> tuple[Any, Any]:
    """Submit ``cid`` while no poll can take it: the parked poll is answered (empty) and the
    runner's next poll is held until just after the command's deadline. Deterministic: a
    command submitted while a poll is parked would be delivered at once, never queued."""
    w = rig.world
    rid = w.runner_id
    parked = await within("the runner's long poll to be parked",
                          w.cp.poll_held(rid, timeout=WAIT + 1))
    mark = w.cp.history.last_seq
    w.cp.faults.delay_next("poll", seconds=QUEUED_DEADLINE + 2)
    parked.wake()  # answered empty now (nothing queued); the next poll takes the delay
    nxt = await within("the runner's next poll (to be held)", w.cp.history.wait_for(
        lambda ex: ex.route == "poll" and ex.runner_id == rid, timeout=None, after_seq=mark))
    if nxt.fault != "delay":
        raise AssertionError(f"the runner's next poll was not held: {nxt}")
    handle = await w.cp.submit(rid, "http", actions.http_payload(rig), command_id=cid,
                               deadline=QUEUED_DEADLINE)
    if handle.deliveries:
        raise AssertionError(f"{cid} was delivered while the runner's poll was held")
    return handle, parked


async def _retire(rig: Rig, cell: Cell) -> None:
    _handle, out = await actions.retire(rig)
    if out.code != UNCERTAIN:
        raise CellFailed(cell, f"a one-hour-old receipt answered {out}, not {UNCERTAIN}")


RUNNERS = {"kill": _kill, "server": _server, "route": _route, "deadline": _deadline,
           "retire": _retire}


def run_cell(rig: Rig, cell: Cell, *, replay: str = "") -> dict[str, Any]:
    """Run one cell on ``rig`` and judge its facts; raises :class:`CellFailed` with the
    rendered witness on a violation."""
    before = rig.stats.restarts
    rig.begin()
    rig.call(RUNNERS[cell.row], rig, cell, timeout=60)
    rig.settle()
    found = rig.violations()
    rig.stats.steps += 1
    if found:
        v = found[0]
        raise CellFailed(cell, render(v, seed=0, replay=replay,
                                      steps=f"run_cell(rig, Cell{dataclasses.astuple(cell)})"), v)
    return {"cell": cell.id, "restarts": rig.stats.restarts - before}


@dataclasses.dataclass
class RowRun:
    """What :func:`run_row` gives: each cell with its outcome (``run_cell``'s value or the
    exception it raised), in the order given, and every lane's rig (the caller's first)."""

    outcomes: list[tuple[Cell, dict[str, Any] | Exception]]
    rigs: list[Rig]

    def total(self, counter: str) -> int:
        """A counter of :class:`~.machines.rig.Stats` summed over the lanes' rigs."""
        return sum(int(getattr(rig.stats, counter)) for rig in self.rigs)


def run_row(rig: Rig, order: Sequence[Cell], *, replay: str = "") -> RowRun:
    """Run the cells of ``order`` (one row's, in the order to run them) on ``lanes(row)``
    lanes, the first on ``rig``; the others on rigs of ``rig``'s command and options, opened
    for the row and closed after it."""
    row = {c.row for c in order}
    if len(row) > 1:
        raise ValueError(f"one row at a time, not {sorted(row)}")
    rigs = [rig]

    def open_rig() -> Rig:
        lane = Rig(rig.runner_cmd, **rig.options)
        rigs.append(lane)  # its counters stay readable once it is closed
        return lane.open()

    def step(on: Rig, cell: Cell) -> dict[str, Any]:
        return run_cell(on, cell, replay=replay)

    n = lanes(order[0].row) if order else 1
    return RowRun(run_lanes(rig, order, n, step, open_rig), rigs)
