"""Lanes: the cells of one fault-matrix row run on several rigs at once.

Rules:
- A lane is one rig (its own world: control plane on its own port, scripted Hermes, runner
  process and state directory, manual clock, fact sequence, Portal thread) and the cells dealt
  to it (:func:`deal`), run one after another in the dealt order. Lanes share no state: a cell
  is judged on the facts of its own rig only, exactly as on a row of one lane.
- :func:`deal` is deterministic: cell ``i`` of the order goes to lane ``i % n``, so each lane
  keeps the order's relative order (a soak round's shuffled order too).
- The first lane runs on the rig the caller gives (the kept rig, :mod:`.kept`) in the
  caller's thread, so a row of one lane runs exactly as before lanes; every other lane runs in
  a thread of its own on a rig it opens for the row (``open_rig``) and closes when it ends.
- Every cell's outcome (the step's value, or the exception it raised) comes back in the order
  given, whatever lane ran it; a lane whose rig did not open gives that exception to each of
  its cells (the caller judges it: a harness error, not the runner's fault).
- The caller's thread returns (or raises) only after every lane ended: when its own lane is
  interrupted, the other lanes stop before their next cell. The wait for a lane has no bound of
  its own: each of its steps is bounded (a rig's calls are) and so is opening a world.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Generic, TypeVar

from .rig import Rig

C = TypeVar("C")
R = TypeVar("R")


def deal(order: Sequence[C], n: int) -> list[list[C]]:
    """``order`` dealt round-robin onto ``max(1, min(n, len(order)))`` lanes."""
    n = max(1, min(n, len(order)))
    return [list(order[i::n]) for i in range(n)]


class _Row(Generic[C, R]):
    """The outcomes of one row, filled by its lanes (each writes only its own cells' slots)."""

    def __init__(self, step: Callable[[Rig, C], R]) -> None:
        self.step = step
        self.stop = threading.Event()
        self.outcomes: dict[int, R | Exception] = {}  # index in the order → outcome

    def lane(self, rig: Rig, cells: Sequence[tuple[int, C]]) -> None:
        for i, cell in cells:
            if self.stop.is_set():
                return
            try:
                self.outcomes[i] = self.step(rig, cell)
            except Exception as exc:  # noqa: BLE001 - the caller judges it (fail, error, timeout)
                self.outcomes[i] = exc

    def opened_lane(self, open_rig: Callable[[], Rig], cells: Sequence[tuple[int, C]]) -> None:
        try:
            rig = open_rig()
        except Exception as exc:  # noqa: BLE001 - no rig: each cell of the lane is not judged
            for i, _cell in cells:
                self.outcomes[i] = exc
            return
        try:
            self.lane(rig, cells)
        finally:
            rig.close()


def run_lanes(first: Rig, order: Sequence[C], n: int, step: Callable[[Rig, C], R],
              open_rig: Callable[[], Rig]) -> list[tuple[C, R | Exception]]:
    """``step(rig, cell)`` for every cell of ``order`` on ``n`` lanes (:func:`deal`; lane 0 on
    ``first`` in this thread, the others in threads on rigs from ``open_rig``): each cell with
    its outcome (the step's value or the exception it raised), in ``order``."""
    row: _Row[C, R] = _Row(step)
    lanes = deal(list(enumerate(order)), n)
    with ThreadPoolExecutor(max_workers=max(1, len(lanes) - 1),
                            thread_name_prefix="conformance-lane") as pool:
        others = [pool.submit(row.opened_lane, open_rig, cells) for cells in lanes[1:]]
        try:
            row.lane(first, lanes[0] if lanes else [])
        except BaseException:
            row.stop.set()  # interrupted: the other lanes end after their current cell
            raise
        finally:
            for future in others:  # every lane ends before the row does
                future.exception()
        for future in others:
            future.result()  # a lane's own failure (not a cell's) is the row's
    return [(cell, row.outcomes[i]) for i, cell in enumerate(order)]
