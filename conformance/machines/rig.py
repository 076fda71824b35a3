"""``Rig``: one World shared by every example of a machine run, driven through a ``Portal``.

Rules:
- One control plane, one scripted Hermes and one runner process per rig (opened by
  :meth:`Rig.open`, closed by :meth:`Rig.close`); a rig serves one machine run, or several in
  turn when kept (:mod:`.kept`, :meth:`Rig.new_run`, :meth:`Rig.catch_up`). An example does
  not restart anything it did not ask for. An example that left the runner disabled or exited
  gets a freshly registered runner (:meth:`Rig.begin`), never a fresh control plane.
- Every example is judged on the facts recorded since it began (``since``): the control plane's
  history and lifecycle log, the scripted Hermes' effect log and the harness steps below, all on
  the world's one shared sequence, translated and checked by :mod:`conformance.checks`.
- Harness steps are facts: ``kill`` (runner instance, the named point, the command), ``start``,
  ``server_restart``, ``held`` (a request stopped at a Hermes pause point), ``retire``.
  A kill mid-call makes the call's outcome unknown: it is never recorded as a result.
- Counters (examples, steps, restarts) are kept per rig for the case result and the bench.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from ..bounds import scaled
from ..checks import Fact, Violation, check
from ..checks.facts import fact
from ..checks.translate import translate
from ..portal import Portal
from ..world import World
from ..worlds import open_world

T = TypeVar("T")
CALL_TIMEOUT = 30.0
WAIT = 10.0


async def within(what: str, aw: Awaitable[T], timeout: float = WAIT) -> T:
    """Await ``aw`` for at most ``timeout`` seconds; on expiry ``TimeoutError`` names ``what``
    was awaited (every wait of the machines and the matrix is bounded and says what it was)."""
    timeout = scaled(timeout)
    try:
        return await asyncio.wait_for(aw, timeout)
    except TimeoutError:
        raise TimeoutError(f"waited {timeout:g}s for {what}") from None


@dataclasses.dataclass
class Stats:
    examples: int = 0
    steps: int = 0
    restarts: int = 0
    server_restarts: int = 0
    seconds: float = 0.0
    #: the example (counted from 1) whose teardown first found a violation; 0: none
    first_failing_example: int = 0
    #: seconds from the run's start to that teardown (a replay's "at once"); 0.0: none
    first_failure_seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["seconds"] = round(self.seconds, 3)
        s = self.seconds or 1e-9
        d["examples_per_s"] = round(self.examples / s, 2)
        d["steps_per_s"] = round(self.steps / s, 2)
        d["restarts_per_s"] = round(self.restarts / s, 3)
        return d


class Rig:
    """See the module docstring."""

    def __init__(self, runner_cmd: str, **world_options: Any) -> None:
        self.runner_cmd = runner_cmd
        self.options = dict(world_options)  # as given (the key of a kept rig, see .kept)
        self.world_options = {"manual_clock": True, "hermes_script": "slow", **world_options}
        self.portal = Portal("conformance-machine")
        self.world: World
        self.since = 0
        self.harness: list[Fact] = []
        self.stats = Stats()
        self.runner_offset = 0.0  # the faketime offset of the runner's current run
        self.accounts: list[str] = []  # accounts a machine made on this control plane
        self._names = itertools.count(1)
        self._t0 = 0.0

    # -- lifecycle -----------------------------------------------------------------------------
    def open(self) -> Rig:
        """Start the portal and enter a world on it (a world that did not open leaves no
        portal thread behind)."""
        self.portal.start()
        try:
            self.world = self.portal.enter(open_world(self.runner_cmd, **self.world_options))
        except BaseException:
            self.portal.close()
            raise
        self._t0 = time.perf_counter()
        return self

    def close(self) -> None:
        self.stats.seconds = time.perf_counter() - self._t0
        self.portal.close()

    def new_run(self) -> None:
        """Fresh counters for a machine run on a rig kept from an earlier one (.kept)."""
        self.stats = Stats()
        self._t0 = time.perf_counter()

    def elapsed(self) -> float:
        return time.perf_counter() - self._t0

    def lap(self) -> Stats:
        """The counters with ``seconds`` up to now (a run on a kept rig that stays open)."""
        self.stats.seconds = time.perf_counter() - self._t0
        return self.stats

    def __enter__(self) -> Rig:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def call(self, fn: Callable[..., Awaitable[T]], *args: Any, timeout: float = CALL_TIMEOUT) -> T:
        return self.portal.call(fn, *args, timeout=scaled(timeout))

    def seq(self) -> int:
        return self.world.sequence()

    # -- examples ------------------------------------------------------------------------------
    def begin(self) -> None:
        """Start an example: a live runner, clean faults and pauses, a fresh ``since``, and the
        profile sets in force noted as facts (the checker's baseline for invariant 9)."""
        self.call(self._begin)
        self.harness = []
        self.since = self.seq()
        self.stats.examples += 1
        for scope, account, allowed in self.call(self._profile_sets):
            self.note("profiles", reason=scope, account=account, profiles=frozenset(allowed),
                      raw="store")

    async def _profile_sets(self) -> list[tuple[str, str | None, list[str]]]:
        """(scope, account, allowed) in force now: the runner's config, its record, its source
        (when restricted) and every account the rig made."""
        w = self.world
        out: list[tuple[str, str | None, list[str]]] = [
            ("config", None, list(w.config.get("allowedProfiles", [])))]
        record = await w.cp.store.get_runner(w.runner_id)
        if record is not None:
            out.append(("runner", None, list(record.allowed_profiles)))
            source = await w.cp.store.get_source(record.source_node_id)
            if source is not None and source.allowed_profiles is not None:
                out.append(("source", None, list(source.allowed_profiles)))
        for name in self.accounts:
            acc = await w.cp.store.get_account(name)
            if acc is not None:
                out.append(("account", name, list(acc.allowed_profiles)))
        return out

    def sync_clock(self) -> None:
        """A manual clock does not move with the wall: bring it up to the runner's clock (wall
        time + the faketime offset it was started with) so that a deadline the server issues
        is not already past for the runner. Only forward, and by seconds (below the watchdog)."""
        clock = self.world.clock
        if clock is not None:
            lag = time.time() + self.runner_offset - clock.now()
            if lag > 0:
                clock.advance(lag)

    async def catch_up(self) -> None:
        """Bring the server clock up to the runner's clock after the rig sat idle (a kept rig,
        see .kept) in steps the watchdog never sees: before each step the runner's parked
        poll is answered and its next poll parked (so it was seen at the current clock), then
        the clock moves by at most half of ``offline_after``. What is left once the runner was
        seen recently enough (the watchdog would still not count it out after the move) is one
        move: a step costs the runner's pause between two polls in wall time, which for a
        runner that waits seconds after an answer is as much lag as the step removed."""
        w = self.world
        clock = w.clock
        assert clock is not None
        rid = w.runner_id
        while (lag := self.lag()) > 0:
            room = self.watchdog_room()
            if lag < 1.0 or not w.cp.is_online(rid) or (room is not None and lag <= room):
                clock.advance(lag)  # a second, nobody to take offline, or room below the watchdog
                return
            parked = await within("the runner's long poll to be parked (clock catch-up)",
                                  w.cp.poll_held(rid, timeout=WAIT + 1))
            parked.wake()  # answered empty: the runner polls again, seen at the current clock
            await within("the runner's next poll to be parked (clock catch-up)",
                         w.cp.poll_held(rid, other_than=parked, timeout=WAIT + 1))
            clock.advance(min(lag, w.timings.offline_after / 2))

    def lag(self) -> float:
        """How far the server clock is behind the runner's (the wall clock plus the offset the
        runner was started with); 0 without a server clock."""
        clock = self.world.clock
        return time.time() + self.runner_offset - clock.now() if clock is not None else 0.0

    def watchdog_room(self) -> float | None:
        """How far the server clock may move now before the watchdog's next tick could find the
        runner unseen for ``offline_after`` (None when the control plane has no online state:
        nothing to take offline)."""
        w = self.world
        assert w.clock is not None
        slot = w.cp.hub.slots.get(w.runner_id or "")
        if slot is None or slot.online is None:
            return None
        t = w.timings
        return max(0.0, slot.online.seen + t.offline_after - t.watchdog_tick - w.clock.now())

    async def _begin(self) -> None:
        w = self.world
        self.sync_clock()
        w.cp.faults.clear()
        w.hermes.release_all()
        runner = w.runner
        assert runner is not None
        record = await w.cp.store.get_runner(w.runner_id)
        if record is None or not record.enabled or not runner.running:
            if record is None or not record.enabled:
                await self._fresh_runner()
            else:
                await w.start_runner()
        elif not w.cp.is_online(w.runner_id):
            await within("the runner to be online at the example's start",
                         runner.wait_online(w.cp, w.runner_id, WAIT), WAIT + 2)

    async def _fresh_runner(self) -> None:
        """Register another runner on the same control plane (the old one was disabled)."""
        from ..adapter import RunnerUnderTest

        w = self.world
        if w.runner is not None:
            await w.runner.close()
        await w.admin.login()  # admin sessions do not survive a server restart
        w.registered = await w.admin.register(f"{w.runner_name}-{next(self._names)}",
                                              profiles=w.profiles)
        w.secrets.add("runner token", w.registered.token)
        w.config = w.admin.download_config(w.registered, hermes_url=w.hermes.url,
                                           artifact_roots=[str(w.artifact_root)])
        w.runner = RunnerUnderTest(self.runner_cmd, w.config, secrets=w.secrets,
                                   env=w.runner_env, files=w.runner_files)
        await w.start_runner()
        self.stats.restarts += 1

    def settle(self) -> None:
        """Release pauses and faults and let what is in flight land (bounded)."""
        self.call(self._settle)

    async def _settle(self) -> None:
        w = self.world
        w.cp.faults.clear()
        w.hermes.release_all()

    def facts(self) -> list[Fact]:
        def read() -> tuple[list[Any], list[Any], list[Any], list[Any]]:
            w = self.world
            # a long poll received before the example began but answered in it belongs to it
            hist: list[Any] = []
            before: list[Any] = []
            for ex in w.cp.history.entries:
                inside = ex.seq > self.since or (ex.seq_out or 0) > self.since
                (hist if inside else before).append(ex)
            every = w.cp.lifecycle.entries
            # the epoch current when the example began, so a later poll answer in that same
            # epoch is not taken for an epoch change
            first = [e for e in every if e.seq <= self.since and e.kind == "epoch_changed"
                     and e.runner_id == w.runner_id][-1:]
            life = first + [e for e in every if e.seq > self.since]
            effs = [e for e in w.hermes.effects.entries if e.seq > self.since]
            return hist, life, effs, before

        # what earlier examples delivered and the runner has not answered yet is context: a
        # slow runner answers it inside this example, under its delivery's epoch (INV-11)
        hist, life, effs, before = self.portal.call_sync(read)
        return translate(hist, life, effs, list(self.harness), before=before)

    def violations(self) -> list[Violation]:
        return check(self.facts()).violations

    # -- harness facts -------------------------------------------------------------------------
    def note(self, kind: str, **kw: Any) -> Fact:
        f = fact(self.seq(), kind, **kw)
        self.harness.append(f)
        return f

    def instance(self) -> str | None:
        """The runner instance that sent the newest request of the current runner."""
        def read() -> str | None:
            w = self.world
            for ex in reversed(w.cp.history.entries):
                if ex.runner_id == w.runner_id and ex.instance:
                    return str(ex.instance)
            return None

        return self.portal.call_sync(read)
