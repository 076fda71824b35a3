"""A machine rig from the worker's one pool (:class:`conformance.kept_worlds.Pool`): one world
start for a whole family suite and the fault matrix.

Rules:
- :func:`borrow` takes the rig kept for the same runner command and world options
  (:func:`conformance.kept_worlds.rig_key`), or opens a new one. Taking a rig freezes the pool
  (:meth:`Pool.freeze`): the run is synchronous, the session's loop stands still meanwhile, so
  no world kept for plain cases is handed on after it.
- A machine run starts on a borrowed rig as an example starts on any rig (``Rig.new_run`` then
  ``Rig.begin``: a live runner, clean faults and pauses, facts judged only since it began); the
  server clock first catches up with the wall time the rig sat kept (``Rig.catch_up``, in
  steps below the watchdog; a rig kept longer than twice the watchdog's ``offline_after`` is
  closed and a fresh one opened instead: :func:`stale`), and a runner left under ``faketime`` by the previous run is
  restarted on the plain clock, so every run starts from the world a fresh one would give.
- :func:`give_back` keeps the rig only after a run that passed (and only when the pool keeps
  rigs: not under ``--fresh-worlds``); a failed run closes it, so a broken world never reaches
  the next run. With no pool (``pool=None``: the bench, a unit test) a rig is opened and closed
  per run.
- A world start costs one runner start-up (the floor the bench prints): a suite of seven
  families borrowing one rig saves six of them.
"""

from __future__ import annotations

from typing import Any

from ..kept_worlds import Kept, Pool, rig_key
from . import actions
from .rig import Rig


def borrow(pool: Pool | None, runner_cmd: str, options: dict[str, Any]) -> Rig:
    if pool is not None:
        pool.freeze()
        kept = pool.take(rig_key(runner_cmd, options))
        if kept is not None:
            if _revived(kept.world):
                return kept.world
            kept.world.close()  # never left running: its runner would outlive the session
    return Rig(runner_cmd, **options).open()


def _revived(rig: Rig) -> bool:
    """Bring a kept rig back to what a fresh one gives (its clock caught up, its runner on the
    plain clock); False when it cannot be (closed, stale, or the catch-up failed)."""
    if not rig.portal.running or stale(rig):
        return False
    try:
        rig.call(rig.catch_up)  # the clock stood still while the rig was kept
        if rig.runner_offset:
            rig.call(lambda: actions.restart_runner(rig, crash=False))
            rig.runner_offset = 0.0
    except Exception:  # noqa: BLE001 - the kept rig could not be brought back: a fresh one
        return False
    return True


#: a kept rig whose clock lags the runner's by more than this many ``offline_after`` is stale
STALE_AFTER = 2.0


def stale(rig: Rig) -> bool:
    """Whether the rig sat kept longer than :data:`STALE_AFTER` × the watchdog's
    ``offline_after``: catching its clock up takes a step (and one poll of the runner) per half
    of that, seconds each for a runner that pauses between polls (more than the portal call's
    bound after minutes kept); a fresh rig costs one start-up."""
    return rig.lag() > STALE_AFTER * rig.world.timings.offline_after


def give_back(pool: Pool | None, rig: Rig, *, passed: bool) -> None:
    if pool is None or not pool.rigs or not passed or not rig.portal.running:
        rig.close()
        return

    async def closer() -> None:
        rig.close()

    pool.keep(Kept(rig, rig_key(rig.runner_cmd, rig.options), closer, close_now=rig.close))
