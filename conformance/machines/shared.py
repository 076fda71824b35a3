"""A rig kept for the next machine run (one world start for a whole family suite).

Rules:
- :func:`borrow` gives the rig kept for the same runner command and world options, or opens a
  new one (closing a kept rig of other options first: at most one world is kept).
- A machine run starts on a borrowed rig as an example starts on any rig (``Rig.new_run`` then
  ``Rig.begin``: a live runner, clean faults and pauses, facts judged only since it began); the
  server clock first catches up with the wall time the rig sat kept (``Rig.catch_up``, in
  steps below the watchdog), and a runner left under ``faketime`` by the previous run is
  restarted on the plain clock, so every run starts from the world a fresh one would give.
- :func:`give_back` keeps the rig only after a run that passed; a failed run closes it, so a
  broken world never reaches the next run. :func:`close_kept` closes what is kept (the pytest
  session's cleanup, the bench's end).
- Only a borrowed rig is ever given back: a fault-matrix row's other lanes (:mod:`.lanes`) run
  on rigs opened for the row and closed after it, so at most one world is kept still.
- A world start costs one runner start-up (the floor the bench prints): a suite of seven
  families borrowing one rig saves six of them.
"""

from __future__ import annotations

from typing import Any

from . import actions
from .rig import Rig

_kept: dict[str, Rig] = {}


def _key(runner_cmd: str, options: dict[str, Any]) -> str:
    return repr((runner_cmd, sorted(options.items())))


def borrow(runner_cmd: str, options: dict[str, Any]) -> Rig:
    key = _key(runner_cmd, options)
    rig = _kept.pop(key, None)
    close_kept()
    if rig is None or not rig.portal.running:
        return Rig(runner_cmd, **options).open()
    rig.call(rig.catch_up)  # the clock stood still while the rig was kept
    if rig.runner_offset:
        rig.call(lambda: actions.restart_runner(rig, crash=False))
        rig.runner_offset = 0.0
    return rig


def give_back(rig: Rig, *, passed: bool) -> None:
    if passed and rig.portal.running:
        close_kept()
        _kept[_key(rig.runner_cmd, rig.options)] = rig
    else:
        rig.close()


def close_kept() -> None:
    while _kept:
        _kept.popitem()[1].close()
