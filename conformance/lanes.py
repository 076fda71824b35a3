"""Several cases in flight in one pytest process: lanes.

A case spends most of its wall time waiting on the runner's own timers (its reconnect pause, a
start-up, a held poll), so one process can keep several in flight, and the CPU they leave idle is
used. pytest runs one item at a time; lanes run the cases it is certain to reach next ahead of it
and report each when pytest comes to it.

Rules of this module:
- A lane runs one case item whole — the world's setup, the case, the world's teardown
  (:func:`conformance.casefixtures.case_world`, the ``world`` fixture's own steps) — as a task on
  the lanes' event loop, which runs in a thread of its own: a case in flight is served while
  pytest reports another or waits for its next item.
- Which items run on a lane (:func:`on_lane`): case items whose function asks only for the
  fixtures in :data:`FIXTURES`. Any other item goes through pytest's protocol as usual, and
  alone: nothing is run ahead past it (an ordinary test may patch what a case reads).
- What runs ahead (:meth:`Lanes.fill`): only items this process is certain to run next: in a
  plain session the items after the current one, in pytest's order, started as pytest reaches an
  item and as a case in flight ends; in an xdist worker the one item the worker has already
  taken (``nextitem``: a queued item may still be handed to another worker). At most ``width``
  cases are in flight.
- A synchronous case (a property family, a fault-matrix row: they drive their own loops in
  threads; Hypothesis runs tests in several threads since 6.136.9) runs in a thread of its own
  with a pool of kept worlds and rigs no other case in flight has; the coroutine cases share
  one pool on the lanes' loop, which in a plain session keeps a world only while a case not
  started yet has its key (``Pool.wanted``). No pool is touched from two loops.
- Reports are made as pytest makes them: ``pytest_runtest_makereport`` from a ``CallInfo`` per
  phase with the phase's real start, stop, duration and exception, logged in pytest's order when
  pytest reaches the item. The judge, JUnit, the terminal and xdist see what they always see.
- A case's programs are counted on its own lane (:func:`conformance.environment.track`).
- The per-case bound (pytest-timeout's ``timeout`` of the item, already scaled by the run's
  multiplier) ends a case in flight with :class:`CaseTimeout` (judged ``timeout``); pytest-timeout
  itself is switched off for a lane's item at collection (:func:`take_bound`: its timer would
  fire in the wrong thread).
- Interrupted (Ctrl-C, or the SIGTERM certify turns into one) while pytest waits for a case,
  the cases that already ended on their lanes are reported first, in the run's order, so what
  was judged is kept; the case waited for and those still in flight stay not-run.
- At the session's end (after a stop or an interrupt too) the cases still in flight are
  cancelled and given :data:`CANCEL_BOUND` seconds to end (a synchronous case, whose thread
  cannot be cancelled, is ended at its next portal call: :func:`conformance.portal.stop_calls`),
  then the lanes' pools are closed
  within :data:`CLOSE_BOUND`; a runner a cancelled case could not stop in time is killed at
  exit with its process group (:mod:`conformance.process`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import inspect
import os
import threading
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Coroutine
from dataclasses import dataclass
from typing import Any

import pytest

from fake_server.verbs import CURRENT_TEST

from . import environment, portal
from .casefixtures import POOL, case_world, new_pool, session_plugin
from .judge import STATE, require_row
from .kept_worlds import CAPACITY, Pool

#: the fixtures a case on a lane may ask for (what the plugin provides)
FIXTURES = frozenset({"world", "runner_cmd", "hermes_mode", "case_seed", "case_row", "request"})
#: in an xdist worker a lane can only run the item the worker has already taken: two in flight
WORKER_LANES = 2
#: cases in flight per core when one process runs them all (certify's ``-j 1``)
LANES_PER_CORE = 3


def default_lanes(jobs: int, cores: int | None = None) -> int:
    """certify's ``--lanes`` when not given: ``LANES_PER_CORE`` per core in one process, else
    ``WORKER_LANES`` in each of ``jobs`` workers."""
    cores = max(1, cores if cores is not None else (os.cpu_count() or 1))
    return LANES_PER_CORE * cores if jobs == 1 else WORKER_LANES


#: a teardown after the case's bound ran out still gets this long to close its world
TEARDOWN_GRACE = 30.0
#: how long the session's end waits for the cases still in flight to end once cancelled (an
#: interrupted run), then for the kept worlds to close
CANCEL_BOUND = 5.0
CLOSE_BOUND = 30.0


class CaseTimeout(TimeoutError):
    """The case's own bound ran out on its lane (pytest-timeout's ``timeout``)."""


def on_lane(item: pytest.Item) -> bool:
    """A case item whose function asks only for :data:`FIXTURES`."""
    if item.stash.get(STATE, None) is None or not isinstance(item, pytest.Function):
        return False
    names = getattr(getattr(item, "_fixtureinfo", None), "argnames", None)
    return names is not None and set(names) <= FIXTURES and callable(getattr(item, "obj", None))


@dataclass
class Phase:
    """One phase of a case as it ran on its lane."""

    when: str
    start: float  # time.time()
    stop: float
    duration: float  # perf_counter
    exc: BaseException | None = None


class _ConfigView:
    """The session's config with a stash of its own: a synchronous case's ``pool_of`` finds
    the pool of its lane there."""

    def __init__(self, config: pytest.Config, pool: Pool) -> None:
        self._config = config
        self.stash = pytest.Stash()
        self.stash[POOL] = pool

    def __getattr__(self, name: str) -> Any:
        return getattr(self._config, name)


class _Request:
    """What a case on a lane gets as ``request``: its config, its node, its fixture values."""

    def __init__(self, config: Any, node: pytest.Item, values: dict[str, Any]) -> None:
        self.config = config
        self.node = node
        self._values = values

    def getfixturevalue(self, name: str) -> Any:
        if name not in self._values:
            raise LookupError(f"{name} is not a fixture a case on a lane can ask for")
        return self._values[name]


BOUND = pytest.StashKey[float | None]()


def take_bound(item: pytest.Item) -> None:
    """At collection, before pytest-timeout arms its timer for the item: keep the item's bound
    for its lane and switch pytest-timeout off for it (its timer would fire in the wrong
    thread)."""
    if on_lane(item):
        item.stash[BOUND] = bound_of(item)
        item.add_marker(pytest.mark.timeout(0), append=False)


def bound_of(item: pytest.Item) -> float | None:
    """The item's pytest-timeout bound in seconds (None: none), as pytest-timeout reads it."""
    if not item.config.pluginmanager.hasplugin("timeout"):
        return None
    try:
        import pytest_timeout

        seconds = pytest_timeout._get_item_settings(item).timeout
    except Exception:  # noqa: BLE001 - a version whose settings are read differently
        return None
    return float(seconds) if seconds and seconds > 0 else None


class Lanes:
    """The lanes of one pytest process (see the module's rules)."""

    def __init__(self, config: pytest.Config, width: int, items: list[pytest.Item] | None) -> None:
        self.config = config
        self.width = max(1, width)
        #: the items in run order when this process runs them all (None: an xdist worker)
        self.order = items
        self.index = {id(it): i for i, it in enumerate(items)} if items is not None else {}
        #: the items started and not reported yet, with their runs, by ``id(item)``
        self.runs: dict[int, tuple[pytest.Item, concurrent.futures.Future[list[Phase]]]] = {}
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self._serve, name="conformance-lanes", daemon=True)
        self.thread.start()
        self.pool = new_pool(config, capacity=max(CAPACITY, self.width))
        #: the world keys of the cases not started yet (a plain session: its whole order)
        self.coming: Counter[str] = Counter()
        if items is not None:
            share_key = session_plugin(config).share_key
            self.coming.update(k for it in items if on_lane(it) and (k := share_key(it)))
            self.pool.wanted = lambda key: self.coming[key] > 0
        self.sync_pools: list[Pool] = []  # every pool a synchronous case had
        self.sync_free: list[Pool] = []  # those no case has now
        self.sync_running = 0  # synchronous cases whose thread still runs
        self.sync_done = threading.Condition()
        self.lock = threading.RLock()
        self.cursor = 0  # the next item of ``order`` not yet considered
        self.closing = False

    def _serve(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    # -- what pytest calls (the main thread) -----------------------------------------------
    def protocol(self, item: pytest.Item, nextitem: pytest.Item | None) -> None:
        """Run ``item`` (started now unless it already is), start what comes next, wait for
        ``item`` and log its reports."""
        with self.lock:
            self._start(item)
            if self.order is None:
                if nextitem is not None and on_lane(nextitem) and self._flying() < self.width:
                    self._start(nextitem)
            else:
                self.cursor = max(self.cursor, self.index.get(id(item), -1) + 1)
        self.fill()
        try:
            phases = self.runs.pop(id(item))[1].result()
        except KeyboardInterrupt:  # Ctrl-C, or SIGTERM (certify): keep what already ended
            self._report_ended()
            raise
        report(item, phases)

    def _report_ended(self) -> None:
        """Log the cases that ended on their lanes before pytest reached them, in the run's
        order: an interrupt must not throw away what was judged (the rest stays not-run)."""
        ended = sorted((self.index.get(i, 0), i) for i, (_, f) in self.runs.items()
                       if f.done() and not f.cancelled() and f.exception() is None)
        for _, i in ended:
            item, future = self.runs.pop(i)
            report(item, future.result())

    def fill(self) -> None:
        """Start the items certain to come next (a plain session's order), up to ``width``
        in flight; called as pytest reaches an item and as a case in flight ends."""
        if self.order is None:
            return
        with self.lock:
            while self.cursor < len(self.order) and self._flying() < self.width:
                nxt = self.order[self.cursor]
                if nxt.session.shouldstop or nxt.session.shouldfail or self.closing:
                    return
                if not on_lane(nxt):
                    return  # nothing runs beside a test that is not on a lane
                self.cursor += 1
                self._start(nxt)

    def _sync_case(self, item: pytest.Item, args: dict[str, Any]) -> None:
        """A synchronous case, in its thread (counted from before the thread is asked for, so
        the session's end never misses one about to start)."""
        try:
            item.obj(**args)  # type: ignore[attr-defined]
        finally:
            with self.sync_done:
                self.sync_running -= 1
                self.sync_done.notify_all()

    def _sync_pool(self) -> Pool:
        pool = new_pool(self.config)
        self.sync_pools.append(pool)
        return pool

    def _flying(self) -> int:
        return sum(1 for _, f in self.runs.values() if not f.done())

    def _start(self, item: pytest.Item) -> None:
        if id(item) in self.runs:
            return
        if self.order is not None and (key := session_plugin(self.config).share_key(item)):
            self.coming[key] -= 1
        future = asyncio.run_coroutine_threadsafe(self._run(item, item.stash[BOUND]), self.loop)
        self.runs[id(item)] = (item, future)
        future.add_done_callback(lambda _: self.fill())

    def close(self) -> None:
        """Cancel what is still in flight, close the pools, stop the loop (bounded)."""
        if not self.thread.is_alive():
            return
        with self.lock:
            self.closing = True
        with self.sync_done:
            stopping = self.sync_running > 0
        if stopping:  # a synchronous case still runs (an interrupt): its next call ends it
            portal.stop_calls()
        fut = asyncio.run_coroutine_threadsafe(self._close(), self.loop)
        with contextlib.suppress(Exception):
            fut.result(timeout=CANCEL_BOUND + CLOSE_BOUND + 1)
        if stopping:
            with self.sync_done:  # its thread is not the interpreter's to wait for at exit
                self.sync_done.wait_for(lambda: self.sync_running == 0, timeout=CANCEL_BOUND)
            portal.resume_calls()
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=CLOSE_BOUND)
        if not self.thread.is_alive():
            self.loop.close()
        for pool in self.sync_pools:
            with contextlib.suppress(Exception):
                pool.close_rigs()

    # -- on the lanes' loop ------------------------------------------------------------------
    async def _close(self) -> None:
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for t in tasks:
            t.cancel()
        if tasks:  # a world's clean-up may outlast this: its runners die at exit (process.py)
            await asyncio.wait(tasks, timeout=CANCEL_BOUND)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(CLOSE_BOUND):
                await self.pool.close()
                for pool in self.sync_pools:
                    await pool.drain()

    async def _run(self, item: pytest.Item, bound: float | None) -> list[Phase]:
        state = item.stash[STATE]
        state.uses = environment.track()
        config = self.config
        deadline = None if bound is None else self.loop.time() + bound
        values: dict[str, Any] = {
            "runner_cmd": session_plugin(config).runner_cmd, "hermes_mode": str(config.option.hermes),
            "case_seed": state.seed, "case_row": state.row}
        names = set(item._fixtureinfo.argnames)  # type: ignore[attr-defined]
        sync = not inspect.iscoroutinefunction(item.obj)  # type: ignore[attr-defined]
        phases: list[Phase] = []
        world: AsyncIterator[Any] | None = None

        def passed() -> bool:
            return len(phases) >= 2 and all(p.exc is None for p in phases)

        async def setup() -> None:
            nonlocal world
            require_row(state, item.nodeid)
            if "world" in names:
                world = case_world(config, item, runner_cmd=values["runner_cmd"],
                                   hermes_mode=values["hermes_mode"], case_seed=state.seed,
                                   pool=self.pool, passed=passed)
                values["world"] = await anext(world)

        def arguments(seen_config: Any) -> dict[str, Any]:
            given = {**values, "request": _Request(seen_config, item, values)}
            return {n: given[n] for n in names}

        async def call() -> None:
            if not sync:
                await item.obj(**arguments(config))  # type: ignore[attr-defined]
                return
            pool = self.sync_free.pop() if self.sync_free else self._sync_pool()
            with self.sync_done:
                self.sync_running += 1
            await asyncio.to_thread(self._sync_case, item, arguments(_ConfigView(config, pool)))
            # (cancelled: the thread runs on with its pool, which is not handed on)
            self.sync_free.append(pool)

        async def teardown() -> None:
            if world is not None:
                with contextlib.suppress(StopAsyncIteration):
                    await anext(world)
                    raise RuntimeError("the world fixture yielded twice")

        await _phase(item.nodeid, phases, "setup", setup, deadline, bound)
        if phases[-1].exc is None:
            await _phase(item.nodeid, phases, "call", call, deadline, bound)
        grace = None if deadline is None else max(deadline, self.loop.time()) + TEARDOWN_GRACE
        await _phase(item.nodeid, phases, "teardown", teardown, grace, bound)
        return phases


async def _phase(nodeid: str, phases: list[Phase], when: str,
                 step: Callable[[], Coroutine[Any, Any, None]], deadline: float | None,
                 bound: float | None) -> None:
    start, t0 = time.time(), time.perf_counter()
    exc: BaseException | None = None
    CURRENT_TEST.set(f"{nodeid} ({when})")  # what the command log names (fake_server.verbs)
    try:
        async with asyncio.timeout_at(deadline):
            await step()
    except TimeoutError as e:
        task = asyncio.current_task()
        exc = e
        if deadline is not None and asyncio.get_running_loop().time() >= deadline and (
                task is None or not task.cancelling()):
            exc = CaseTimeout(f"Timeout >{bound:g}s: the case's bound ran out ({when})")
            exc.__cause__ = e
            exc = exc.with_traceback(e.__traceback__)  # pytest reports a traceback
    except asyncio.CancelledError:
        raise
    except BaseException as e:  # noqa: BLE001 - every exception is the phase's outcome
        exc = e
    phases.append(Phase(when, start, time.time(), time.perf_counter() - t0, exc))


def report(item: pytest.Item, phases: list[Phase]) -> None:
    """Log ``item``'s phases as pytest's own protocol does (the main thread)."""
    ihook = item.ihook
    ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
    for ph in phases:
        excinfo = pytest.ExceptionInfo.from_exception(ph.exc) if ph.exc is not None else None
        call: pytest.CallInfo[None] = pytest.CallInfo(
            None, excinfo, start=ph.start, stop=ph.stop, duration=ph.duration,
            when=ph.when, _ispytest=True)  # type: ignore[arg-type]
        rep = ihook.pytest_runtest_makereport(item=item, call=call)
        ihook.pytest_runtest_logreport(report=rep)
    ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
