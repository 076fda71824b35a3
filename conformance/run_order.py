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
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

_T = TypeVar("_T")


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
