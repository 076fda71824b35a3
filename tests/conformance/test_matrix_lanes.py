"""Lanes of the fault matrix: the deal, the lane table, and ``run_lanes`` on stand-in rigs (no
sockets); one row on real rigs against the reference runner, each lane its own world."""

from __future__ import annotations

import sys
import threading
from typing import Any, cast

import pytest

from conformance.faults_matrix import CELLS, LANES, cells, lanes, run_row
from conformance.machines.lanes import deal, run_lanes
from conformance.machines.rig import Rig

REF = f"{sys.executable} -m runner_ref --config {{config}}"
BOUND = 10.0  # seconds a stand-in lane may wait for the others (a bound, never reached)


class FakeRig:
    """Stands in for a rig: a name, whether it was closed, the thread that used it."""

    def __init__(self, name: str) -> None:
        self.name, self.closed, self.threads = name, False, set[str]()

    def close(self) -> None:
        self.closed = True


def test_deal_is_round_robin_and_keeps_the_order_per_lane() -> None:
    assert deal(list("abcdefg"), 3) == [["a", "d", "g"], ["b", "e"], ["c", "f"]]
    assert deal(list("ab"), 3) == [["a"], ["b"]]
    assert deal(list("abc"), 0) == [["a", "b", "c"]]
    assert deal([], 3) == [[]]
    shuffled = list("gcafbed")  # a soak round's order: each lane keeps its relative order
    for lane in deal(shuffled, 3):
        assert sorted(lane, key=shuffled.index) == lane


def test_lanes_come_from_the_table_and_never_exceed_the_cells() -> None:
    for row in {c.row for c in CELLS}:
        assert 1 <= lanes(row) <= min(LANES.get(row, 1), len(cells(row)))
    assert lanes("retire") == 1 and lanes("deadline") == 1 and lanes("route") == 1
    assert lanes("server") > 1 and lanes("kill") > 1  # a restart rebinds a stable port
    assert all(n <= 3 for n in LANES.values())


def _run(order: list[str], n: int, step: Any, opened: list[FakeRig],
         first: FakeRig | None = None) -> list[tuple[str, Any]]:
    def open_rig() -> Rig:
        rig = FakeRig(f"lane-{len(opened) + 1}")
        opened.append(rig)
        return cast(Rig, rig)

    return run_lanes(cast(Rig, first or FakeRig("kept")), order, n, step, open_rig)


def test_run_lanes_runs_at_once_and_answers_in_the_order_given() -> None:
    order = [f"c{i}" for i in range(7)]
    together = threading.Barrier(3, timeout=BOUND)  # only lanes running at once pass it
    ran: dict[str, str] = {}

    def step(rig: Any, cell: str) -> str:
        if cell in ("c0", "c1", "c2"):  # each lane's first cell
            together.wait()
        rig.threads.add(threading.current_thread().name)
        ran[cell] = rig.name
        if cell == "c4":
            raise ValueError("c4 broke")
        return cell.upper()

    kept, opened = FakeRig("kept"), list[FakeRig]()
    out = _run(order, 3, step, opened, kept)
    assert [c for c, _ in out] == order
    assert [v for _, v in out if not isinstance(v, Exception)] == ["C0", "C1", "C2", "C3",
                                                                    "C5", "C6"]
    assert isinstance(dict(out)["c4"], ValueError)
    assert {c for c, name in ran.items() if name == "kept"} == {"c0", "c3", "c6"}
    assert kept.threads == {threading.current_thread().name} and not kept.closed
    assert len(opened) == 2 and all(r.closed for r in opened)
    assert all(len(r.threads) == 1 and r.threads != kept.threads for r in opened)


def test_a_lane_whose_rig_did_not_open_gives_each_cell_that_error() -> None:
    def open_rig() -> Rig:
        raise OSError("no world")

    out = run_lanes(cast(Rig, FakeRig("kept")), ["a", "b", "c", "d"], 2,
                    lambda rig, cell: cell, open_rig)
    assert [c for c, _ in out] == ["a", "b", "c", "d"]
    assert out[0][1] == "a" and out[2][1] == "c"
    assert all(isinstance(v, OSError) for _, v in (out[1], out[3]))


class Interrupted(BaseException):
    """As pytest-timeout's or a KeyboardInterrupt: not a cell's outcome, the row's end."""


def test_an_interrupted_row_ends_every_lane_before_it_raises() -> None:
    started, raised = threading.Event(), threading.Event()
    ran: list[str] = []

    def step(rig: Any, cell: str) -> str:
        ran.append(cell)
        if rig.name == "kept":
            assert started.wait(BOUND)  # the other lane is in its first cell
            raised.set()
            raise Interrupted
        started.set()
        assert raised.wait(BOUND)
        return cell

    opened: list[FakeRig] = []
    with pytest.raises(Interrupted):
        _run([f"c{i}" for i in range(8)], 2, step, opened)
    assert opened[0].closed  # its lane ended (and closed its rig) before the row raised
    assert "c1" in ran and not {"c2", "c4", "c6"} & set(ran)


def test_a_row_on_lanes_each_its_own_world() -> None:
    """Four cells of the kill row on its lanes against the reference runner: every cell
    passes on its own rig, each rig a world of its own (port, runner, work directory)."""
    order = cells("kill")[:4]
    with Rig(REF) as rig:
        run = run_row(rig, order)
    assert [c.id for c, _ in run.outcomes] == [c.id for c in order]
    assert [v for _, v in run.outcomes if isinstance(v, Exception)] == []
    n = lanes("kill")
    assert len(run.rigs) == n and len({id(r.world) for r in run.rigs}) == n
    assert len({r.world.cp.port for r in run.rigs}) == n
    assert len({str(r.world.artifact_root) for r in run.rigs}) == n
    assert run.total("restarts") >= len(order)
