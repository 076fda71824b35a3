"""The run order of cases (conformance.run_order): long cases first, one per worker; kept
worlds get long runs; blocks cut where pytest-xdist's worksteal cuts them."""
from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from xdist.scheduler.worksteal import WorkStealingScheduling

from conformance.run_order import (
    RUNS_PER_LANE,
    case_order,
    cut_runs,
    lane_order,
    with_mean,
    xdist_blocks,
)

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


# -- one process on lanes: lane_order ---------------------------------------------------------

def run_on_lanes(order: list[str], cost: dict[str, float], width: int) -> dict[str, tuple[float, float]]:
    """What the lanes do with ``order`` when every case takes its recorded time: each case
    starts when a lane frees (the earliest one), in order. Case -> (start, end)."""
    free = [0.0] * width
    out: dict[str, tuple[float, float]] = {}
    for it in order:
        j = min(range(width), key=lambda k: (free[k], k))
        out[it] = (free[j], free[j] + cost[it])
        free[j] += cost[it]
    return out


def most_in_flight(spans: list[tuple[float, float]]) -> int:
    edges = sorted([(s, 1) for s, e in spans if e > s] + [(e, -1) for s, e in spans if e > s])
    now = top = 0
    for _, d in edges:
        now += d
        top = max(top, now)
    return top


def test_lanes_run_a_world_keys_cases_one_after_another_costly_work_first() -> None:
    """Six cases of key ``a`` on three lanes: one lane runs them in turn (one kept world), the
    long case and the costly unshared cases start at once, the cheap ones come last."""
    cost = {"L1": 9.0, "o1": 4.0, "o2": 0.5, "o3": 3.0} | {f"a{i}": 1.0 for i in range(6)}
    items = ["o1", "a0", "o2", "a1", "a2", "L1", "a3", "o3", "a4", "a5"]
    order = lane_order(items, lambda it: "a" if it[0] == "a" else None, 3, cost.get,
                       long=lambda it: it[0] == "L")
    assert order[0] == "L1" and set(order[:3]) == {"L1", "a0", "o1"}
    assert order[-1] == "o2"
    spans = run_on_lanes(order, cost, 3)
    assert most_in_flight([spans[f"a{i}"] for i in range(6)]) == 1
    assert [it for it in order if it[0] == "a"] == [f"a{i}" for i in range(6)]


def test_a_big_key_is_cut_into_runs_and_an_unknown_case_costs_the_mean() -> None:
    cost = {f"a{i}": 1.0 for i in range(12)}
    items = [f"a{i}" for i in range(12)] + ["new"]
    order = lane_order(items, lambda it: "a" if it[0] == "a" else None, 3, cost.get)
    spans = run_on_lanes(order, cost | {"new": 1.0}, 3)
    # 13 s on 3 lanes, runs of at most 13/3/2 s: the key's cases on every lane, none idle
    assert max(e for _, e in spans.values()) == 5.0
    assert sorted(order) == sorted(items)


@given(st.lists(st.tuples(st.sampled_from(["L", "o", "a", "b", "c"]),
                          st.none() | st.floats(0, 10)), max_size=60),
       st.integers(1, 8))
def test_lane_order_is_a_permutation_long_cases_first_runs_in_order_and_a_short_tail(
    kinds: list[tuple[str, float | None]], width: int,
) -> None:
    items = [f"{k}{i}" for i, (k, _) in enumerate(kinds)]
    cost = {it: c for it, (_, c) in zip(items, kinds, strict=True) if c is not None}

    def key(it: str) -> str | None:
        return None if it[0] in "Lo" else it[0]

    order = lane_order(items, key, width, cost.get, long=lambda it: it[0] == "L")
    assert sorted(order) == sorted(items)
    assert order == lane_order(items, key, width, cost.get, long=lambda it: it[0] == "L")
    longs = [it for it in items if it[0] == "L"]
    assert sorted(order[:len(longs)]) == sorted(longs)  # long cases start first
    costs = dict(zip(items, with_mean([cost.get(it) for it in items]), strict=True))
    cap = sum(costs.values()) / width / RUNS_PER_LANE
    for k in "abc":  # a run of one key keeps its collection order
        mine = [it for it in items if it[0] == k]
        for run in cut_runs(mine, costs.__getitem__, cap):
            assert [it for it in order if it in run] == run
    # Graham's bound for a list schedule: the run ends within one unit of a perfect balance
    spans = run_on_lanes(order, costs, width)
    end = max((e for _, e in spans.values()), default=0.0)
    unit = max([cap, *costs.values()], default=0.0)
    assert end <= sum(costs.values()) / width + unit + 1e-6
