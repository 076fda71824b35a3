"""The run order of cases (conformance.run_order): long cases first, one per worker; kept
worlds get long runs; blocks cut where pytest-xdist's worksteal cuts them."""
from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from xdist.scheduler.worksteal import WorkStealingScheduling

from conformance.run_order import case_order, xdist_blocks

KEYS = {"p1a": "a", "p3a": "a", "p4a": "a", "p2b": "b", "p5b": "b"}


def test_one_worker_runs_long_then_unshared_then_grouped() -> None:
    items = ["o1", "p1a", "L1", "o2", "p2b", "p3a", "o3", "L2", "p4a", "p5b"]
    order = case_order(items, KEYS.get, 1, long=lambda it: it.startswith("L"))
    assert order == ["L1", "L2", "o1", "o2", "o3", "p1a", "p3a", "p4a", "p2b", "p5b"]


def test_long_cases_start_each_block() -> None:
    items = ["o1", "p1a", "L1", "o2", "p2b", "p3a", "o3", "L2", "p4a", "p5b"]
    order = case_order(items, KEYS.get, 2, long=lambda it: it.startswith("L"))
    first, second = xdist_blocks(len(items), 2)
    assert order[0] == "L1" and order[first] == "L2"
    assert order == ["L1", "o1", "p1a", "p3a", "p4a", "L2", "o2", "o3", "p2b", "p5b"]
    assert first + second == len(items)


@given(n=st.integers(0, 400), workers=st.integers(1, 12))
def test_blocks_are_the_ones_worksteal_hands_out(n: int, workers: int) -> None:
    """xdist_blocks against the scheduler itself, driven with stand-in nodes."""
    sent: dict[int, list[int]] = {}

    class Node:
        def __init__(self, i: int) -> None:
            self.i, self.shutting_down = i, False
            self.gateway = type("G", (), {"id": f"gw{i}"})()

        def send_runtest_some(self, indices: list[int]) -> None:
            sent[self.i] = list(indices)

        def shutdown(self) -> None:
            self.shutting_down = True

    class Config:
        def getvalue(self, name: str) -> Any:
            return [f"{workers}*popen"] if name == "tx" else None

    sched = WorkStealingScheduling(Config())  # type: ignore[arg-type]
    nodes = [Node(i) for i in range(workers)]
    collection = [f"t{i}" for i in range(n)]
    for node in nodes:
        sched.add_node(node)  # type: ignore[arg-type]
        sched.add_node_collection(node, collection)  # type: ignore[arg-type]
    sched.schedule()
    got = [len(sent.get(i, [])) for i in range(workers)]
    assert sum(got) == n and got == xdist_blocks(n, workers)


@given(st.lists(st.sampled_from(["L", "o", "a", "b", "c"]), max_size=60), st.integers(1, 8))
def test_the_order_is_a_permutation_with_every_long_case_at_a_block_front(
    kinds: list[str], workers: int,
) -> None:
    items = [f"{k}{i}" for i, k in enumerate(kinds)]
    order = case_order(items, lambda it: None if it[0] in "Lo" else it[0], workers,
                       long=lambda it: it[0] == "L")
    assert sorted(order) == sorted(items)
    at = 0
    longs = [it for it in items if it[0] == "L"]
    for i, size in enumerate(xdist_blocks(len(items), workers)):
        want = longs[i::workers]
        if len(want) <= size:  # a tiny selection may have more long cases than a block holds
            assert order[at:at + len(want)] == want
        at += size
