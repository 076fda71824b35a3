"""Injectable clocks. Everything time-dependent in the control plane goes through one of these.

``SystemClock`` follows wall time; ``ManualClock`` only moves when a test calls ``advance``,
and ``advance`` fires every timer that falls due (deadlines, redelivery, poll hold, watchdog).
Times are seconds since the Unix epoch (floats); ``now_ms`` is what goes on the wire.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from collections.abc import Callable
from typing import Protocol


class TimerHandle(Protocol):
    def cancel(self) -> None: ...


class Clock(Protocol):
    def now(self) -> float: ...

    def now_ms(self) -> int: ...

    def call_at(self, when: float, callback: Callable[[], None]) -> TimerHandle: ...

    async def sleep(self, seconds: float) -> None: ...


class SystemClock:
    """Wall-clock time; timers run on the asyncio loop."""

    def now(self) -> float:
        return time.time()

    def now_ms(self) -> int:
        return int(self.now() * 1000)

    def call_at(self, when: float, callback: Callable[[], None]) -> TimerHandle:
        loop = asyncio.get_running_loop()
        return loop.call_later(max(0.0, when - self.now()), callback)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))


class _ManualTimer:
    def __init__(self, when: float, callback: Callable[[], None]) -> None:
        self.when = when
        self.callback: Callable[[], None] | None = callback

    def cancel(self) -> None:
        self.callback = None


class ManualClock:
    """A clock that moves only on ``advance``; starts at wall time unless ``start`` is given."""

    def __init__(self, start: float | None = None) -> None:
        self._now = time.time() if start is None else start
        self._heap: list[tuple[float, int, _ManualTimer]] = []
        self._seq = itertools.count()
        self._armed = asyncio.Event()

    def now(self) -> float:
        return self._now

    def now_ms(self) -> int:
        return int(self._now * 1000)

    def call_at(self, when: float, callback: Callable[[], None]) -> TimerHandle:
        timer = _ManualTimer(when, callback)
        heapq.heappush(self._heap, (when, next(self._seq), timer))
        self._armed.set()
        self._armed = asyncio.Event()
        return timer

    async def wait_pending(self, when: float, timeout: float = 10.0) -> None:
        """Wait until a timer due at ``when`` is armed (tests: "the handler sleeps on the clock")."""
        async with asyncio.timeout(timeout):
            while when not in self.pending():
                await self._armed.wait()

    def pending(self) -> list[float]:
        """Due times of the timers still armed, soonest first (tests wait on these)."""
        return sorted(when for when, _, t in self._heap if t.callback is not None)

    def advance(self, seconds: float) -> None:
        """Move time forward and fire, in time order, every timer that falls due."""
        target = self._now + max(0.0, seconds)
        while self._heap and self._heap[0][0] <= target:
            when, _, timer = heapq.heappop(self._heap)
            self._now = max(self._now, when)
            cb, timer.callback = timer.callback, None
            if cb is not None:
                cb()
        self._now = target

    async def sleep(self, seconds: float) -> None:
        if seconds <= 0:  # nothing to wait for: yield once, as asyncio.sleep(0) does
            await asyncio.sleep(0)
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def fire() -> None:
            if not fut.done():
                fut.set_result(None)

        handle = self.call_at(self._now + max(0.0, seconds), fire)
        try:
            await fut
        finally:
            handle.cancel()
