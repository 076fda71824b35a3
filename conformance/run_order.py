"""The order cases run in: long cases first, one per worker; kept worlds get long runs.

Rules:
- pytest-xdist's ``worksteal`` scheduler first hands worker *i* the contiguous block
  :func:`xdist_blocks` computes (the pending items split evenly, in collection order); a worker
  that runs dry later steals the back half of the longest queue. So a worker runs the front of
  its block first, and what is placed at the front of each block starts at once.
- Each block, front to back:
  1. its share of the **long** cases (``@long_case``: a fault-matrix row that enumerates its
     cells, a property family that runs for seconds), dealt round the blocks in collection
     order, so two long cases start together on two workers instead of one after the other
     near the end (the longest-first rule of scheduling);
  2. its share of the cases that never share a world (``key`` None);
  3. its share of those that may, grouped by world ``key`` (collection order within a group),
     so a kept world serves one long run of cases.
- The blocks are cut exactly where xdist cuts them. The order is the same on every worker (xdist
  requires one collection) and a function of the items alone.

One process with several cases in flight (its lanes, conformance/lanes.py: it starts the next
case of its order whenever a case ends) runs :func:`lane_order` instead, a list schedule of the
cases on ``width`` lanes simulated with their recorded durations (conformance/durations.json):
- Units: a long case, or a case that never shares a world, is a unit of its own; the cases of one
  world key form a chain (in collection order) cut into runs of at most half a lane's fair share
  (:data:`RUNS_PER_LANE`), so one run never outlasts the others.
- Units are dealt long cases first, then costliest first (greedy LPT), each to the simulated lane
  that is free soonest (ties: the lower lane, then the earlier unit in collection order).
- The order is the items by their simulated start (ties: the lower lane). So the cases of a run
  follow one another on one lane — its kept world is idle again when the next one starts, instead
  of several cases of one key in flight opening a world each — and the costly work starts first,
  leaving short cases for the end.
- A duration is only a guess of the order: a case that takes longer than recorded makes a later
  one open a world of its own, which costs time, never a verdict. A case the file does not know
  costs the mean of those it knows (1 s when it knows none).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

_T = TypeVar("_T")

#: a world key's chain is cut into runs of at most (total cost / width / this) seconds
RUNS_PER_LANE = 2
#: the cost of a case when no case has a recorded duration
DEFAULT_COST = 1.0


def with_mean(costs: list[float | None]) -> list[float]:
    """``costs`` with each unknown (None) as the mean of the known ones (pytest-split's rule),
    :data:`DEFAULT_COST` when none is known."""
    known = [c for c in costs if c is not None]
    mean = sum(known) / len(known) if known else DEFAULT_COST
    return [mean if c is None else c for c in costs]


def xdist_blocks(total: int, workers: int) -> list[int]:
    """The sizes of the first blocks worksteal hands ``workers`` idle workers."""
    sizes: list[int] = []
    left = total
    for i in range(workers):
        sizes.append(left // (workers - i))
        left -= sizes[-1]
    return sizes


def case_order(items: list[_T], key: Callable[[_T], str | None], workers: int = 1,
               long: Callable[[_T], bool] = lambda it: False) -> list[_T]:
    """``items`` in the run order of the rules above (a permutation of them)."""
    n = max(1, workers)
    longs = [it for it in items if long(it)]
    rest = [it for it in items if not long(it)]
    other = [it for it in rest if key(it) is None]
    groups: dict[str, int] = {}
    for it in rest:
        k = key(it)
        if k is not None:
            groups.setdefault(k, len(groups))
    plain = sorted((it for it in rest if key(it) is not None), key=lambda it: groups[str(key(it))])
    out: list[_T] = []
    fronts = [longs[i::n] for i in range(n)]
    room = [max(0, size - len(f)) for size, f in zip(xdist_blocks(len(items), n), fronts, strict=True)]
    total, filled, o_at, p_at = sum(room), 0, 0, 0
    for i in range(n):
        filled += room[i]
        # `other` spread over the blocks by their room, `plain` filling the rest of it
        o_to = len(other) * filled // total if total else len(other)
        p_to = filled - o_to
        out += fronts[i] + other[o_at:o_to] + plain[p_at:p_to]
        o_at, p_at = o_to, p_to
    return out + other[o_at:] + plain[p_at:]


def cut_runs(chain: list[_T], cost: Callable[[_T], float], cap: float) -> list[list[_T]]:
    """``chain`` cut, in order, into runs of at most ``cap`` (a costlier case alone)."""
    runs: list[list[_T]] = []
    run: list[_T] = []
    load = 0.0
    for it in chain:
        if run and load + cost(it) > cap:
            runs.append(run)
            run, load = [], 0.0
        run.append(it)
        load += cost(it)
    if run:
        runs.append(run)
    return runs


def lane_order(items: list[_T], key: Callable[[_T], str | None], width: int,
               cost: Callable[[_T], float | None],
               long: Callable[[_T], bool] = lambda it: False) -> list[_T]:
    """``items`` in the order one process with ``width`` lanes runs them (a permutation)."""
    n = max(1, width)
    costs = with_mean([cost(it) for it in items])
    cap = sum(costs) / n / RUNS_PER_LANE
    units: list[list[int]] = []  # indices into items
    chains: dict[str, list[int]] = {}
    for i, it in enumerate(items):
        k = None if long(it) else key(it)
        if k is None:
            units.append([i])
        else:
            chains.setdefault(k, []).append(i)
    for chain in chains.values():
        units += cut_runs(chain, costs.__getitem__, cap)
    units.sort(key=lambda u: (not long(items[u[0]]), -sum(costs[i] for i in u), u[0]))
    free = [0.0] * n
    starts: list[tuple[float, int, int]] = []  # (simulated start, lane, place in the dealing)
    for unit in units:
        lane = min(range(n), key=lambda j: (free[j], j))
        for i in unit:
            starts.append((free[lane], lane, len(starts)))
            free[lane] += costs[i]
    dealt = [i for unit in units for i in unit]
    return [items[dealt[at]] for _, _, at in sorted(starts)]
