"""Moving a live-clock runner through its 5-min lease re-checks (§6.5) without a race.

Rules — each guards a choice a correct runner may make:

1. A jump of the runner's clock times out whatever the runner has in flight when it exceeds that
   request's timeout. A held poll may wait 25 s, so a jump is at most :data:`JUMP` (20 s), and
   before each jump a poll *sent after the previous jump* has arrived (two fresh polls).
2. How long a runner waits for the plugin's answer to a re-bind is its own choice (ours: 10 s).
   So no jump starts once the runner's next re-check may have fallen due: a jump starts only
   while the runner's clock is below the **earliest** moment it can fall due; after the jump
   that crosses it nothing moves the clock but real time until the re-bind is seen.
3. When a re-check falls due is the runner's choice within "every 5 min after a lease was
   created": 5 min after the creation, after the last re-check, or after its re-bind ended. All
   lie in ``[lo + RECHECK, hi + RECHECK + SETTLE]``: ``lo`` the runner's clock before the lease
   was created (then the earliest due of each re-check in turn: the k-th cannot fall before
   ``lo + k·RECHECK``), ``hi`` the runner's clock when the last re-bind (or the first bind) was
   seen, and :data:`SETTLE` for the runner to read the plugin's answer.

A round (:meth:`RecheckClock.next_bind`): jumps up to a margin below the earliest due (twice the
slowest fresh-poll wait seen, so the next check still finds the clock below it), one jump that
crosses it and lands on the latest due (or JUMP further, real time covering the rest), then a
bounded wait for the re-bind. Only the clock offset the harness wrote, the control plane's polls
and the plugin's effects are read: the runner is a black box.
"""
from __future__ import annotations

import asyncio
import time
from typing import Any

from conformance.verdict import CaseFailed
from conformance.witness import witness

from ._helpers_channels import WAIT

RECHECK = 300.0      # §6.5: every 5 min
TTL = 1800.0         # §6.5: 30 min
JUMP = 20.0          # the largest single jump (below a held poll's 25 s)
SETTLE = 1.0         # s for a runner to read the answer to a bind the plugin recorded
MIN_STEP = 0.5       # an approach jump shorter than this is not worth two more polls


class RecheckClock:
    """The runner's clock as the harness moves it, and the window of its next re-check.

    Make it before ``lease.create`` is sent, call :meth:`opened` once the lease is bound, then
    :meth:`next_bind` for each re-check and :meth:`reach` for a moment past them."""

    def __init__(self, world: Any) -> None:
        self.world = world
        self.lo = self.hi = self.now()
        self.margin = MIN_STEP     # rule 2's room below the earliest due; grows with slow polls
        self.landed = self.lo      # the runner's clock right after the last jump
        self.floor = self.lo       # the runner's clock the last re-check cannot have preceded

    def now(self) -> float:
        """The runner's clock: the wall clock plus the offset the harness wrote."""
        return time.time() + float(self.world.runner.clock_offset)

    @property
    def earliest(self) -> float:
        return self.lo + RECHECK

    @property
    def latest(self) -> float:
        return self.hi + RECHECK + SETTLE

    def opened(self) -> None:
        """The lease is created and bound: its first re-check's window is set."""
        self.hi = self.now()

    async def _fresh_polls(self) -> None:
        """Return once two more polls arrived (the second was sent after the first one's answer,
        so after whatever happened before this call); the wait widens the margin."""
        started = time.monotonic()
        hist = self.world.cp.history
        mark = max((ex.seq for ex in hist), default=0)
        for _ in range(2):
            ex = await hist.wait_for(lambda e: e.route == "poll", WAIT, after_seq=mark)
            mark = ex.seq
        self.margin = max(self.margin, 2 * (time.monotonic() - started) + MIN_STEP)

    def _jump(self, now: float, seconds: float) -> None:
        self.world.runner.advance_clock(seconds)
        self.landed = now + seconds

    async def move_to(self, target: float) -> None:
        """Move the runner's clock toward ``target`` by rules 1 and 2; it may stop short (real
        time then covers the rest, see :meth:`reach`)."""
        while True:
            await self._fresh_polls()
            now = self.now()
            if now >= target or now >= self.earliest:
                return
            approach = self.earliest - self.margin - now
            if target - now <= JUMP or approach < MIN_STEP:
                self._jump(now, min(JUMP, target - now))    # the last one: it may cross
                return
            self._jump(now, min(JUMP, approach))

    async def reach(self, target: float) -> None:
        """Bring the runner's clock to ``target``: jumps, then real time for what rule 2 left."""
        await self.move_to(target)
        await asyncio.sleep(max(0.0, target - self.now()))

    def bound(self) -> float:
        """The wait for what a re-check does: WAIT, plus what of the window real time must
        still cover (rule 2)."""
        return WAIT + max(0.0, self.latest - self.now())

    async def next_bind(self, session_id: str, n: int) -> list[Any]:
        """Move to the next re-check and return the lease's first ``n`` binds (the first one is
        lease.bind's), awaited for :meth:`bound`. ``floor`` is then the runner's clock this
        re-check cannot have preceded, and the window moves on to the next one."""
        effects = self.world.hermes.effects
        if len(effects.of("bind", session_id=session_id)) < n:
            await self.move_to(self.latest)
        wait = self.bound()
        try:
            found = await effects.wait_for_count("bind", n, timeout=wait, session_id=session_id)
        except TimeoutError:
            got = len(effects.of("bind", session_id=session_id))
            raise CaseFailed(f"{n - 1} re-bind(s) after {n - 1} re-check(s) of a bound lease",
                             f"{got - 1} re-bind(s) within {wait:.0f} s",
                             witness(self.world)) from None
        self.floor = max(self.earliest, self.landed)
        self.lo, self.hi = self.earliest, self.now()
        return found
