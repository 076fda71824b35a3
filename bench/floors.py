"""The floors the end-to-end benches are judged beside, measured in the same run on the same
machine: one bare aiohttp loopback round trip, its loaded rate, one SQLite commit (WAL,
synchronous=FULL, like the runner's ledger), and the statistics they are reported in.
Figures only: nothing here asserts a timing. See docs/bench.md.
"""
from __future__ import annotations

import asyncio
import contextlib
import statistics
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import aiosqlite
from aiohttp import web


# -- statistics ------------------------------------------------------------------------------
def percentile(samples: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of a non-empty sample."""
    ordered = sorted(samples)
    rank = max(1, -(-len(ordered) * q // 100))  # ceil(n*q/100), at least 1
    return ordered[int(rank) - 1]


@dataclass(frozen=True)
class Latency:
    p50: float
    p99: float
    mean: float
    n: int

    @classmethod
    def of(cls, samples: list[float]) -> Latency:
        return cls(percentile(samples, 50), percentile(samples, 99), statistics.fmean(samples),
                   len(samples))


def ms(seconds: float) -> str:
    return f"{seconds * 1000:8.3f} ms"


# -- floors ----------------------------------------------------------------------------------
@contextlib.asynccontextmanager
async def echo_server() -> AsyncIterator[str]:
    """A bare aiohttp server on 127.0.0.1:0 that answers a JSON POST with it; yields its URL."""

    async def echo(request: web.Request) -> web.Response:
        return web.json_response({"ok": True, "echo": await request.json()})

    app = web.Application()
    app.router.add_post("/echo", echo)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}/echo"
    finally:
        await runner.cleanup()


async def floor_round_trip(samples: int) -> Latency:
    """A bare aiohttp POST with a small JSON body and answer, over loopback, keep-alive."""
    times: list[float] = []
    async with echo_server() as url, aiohttp.ClientSession() as session:
        for i in range(samples + 50):
            start = time.perf_counter()
            async with session.post(url, json={"id": i}) as resp:
                await resp.read()
            if i >= 50:  # warm-up
                times.append(time.perf_counter() - start)
    return Latency.of(times)


async def floor_round_trip_rate(requests: int, concurrency: int) -> float:
    """Bare aiohttp loopback round trips per second with ``concurrency`` in flight (client and
    server in this one process, keep-alive): the throughput floor of one HTTP hop."""
    left = requests
    async with echo_server() as url, aiohttp.ClientSession() as session:

        async def worker() -> None:
            nonlocal left
            while left > 0:
                left -= 1
                async with session.post(url, json={"id": left}) as resp:
                    await resp.read()

        await asyncio.gather(*(worker() for _ in range(concurrency)))   # warm-up
        left = requests
        began = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return requests / (time.perf_counter() - began)


async def floor_commit(directory: Path, samples: int) -> Latency:
    """One autocommitted INSERT per sample: WAL + synchronous=FULL, like the runner's ledger."""
    db = await aiosqlite.connect(str(directory / "floor.sqlite3"), isolation_level=None)
    times: list[float] = []
    try:
        await db.execute("PRAGMA journal_mode=WAL")
        await db.execute("PRAGMA synchronous=FULL")
        await db.execute("CREATE TABLE t (id TEXT PRIMARY KEY, fingerprint TEXT NOT NULL, "
                         "state TEXT NOT NULL, result TEXT, created INTEGER NOT NULL)")
        for i in range(samples + 20):
            start = time.perf_counter()
            await db.execute("INSERT INTO t VALUES (?, ?, 'started', NULL, ?)",
                             (f"id-{i}", "f" * 64, i))
            if i >= 20:
                times.append(time.perf_counter() - start)
    finally:
        await db.close()
    return Latency.of(times)


@dataclass(frozen=True)
class Floors:
    """The floors of one run, and the two yardsticks derived from them."""

    rt: Latency            # one aiohttp loopback round trip, one at a time
    commit: Latency        # one SQLite commit (WAL, FULL), one at a time
    rt_rate: float         # aiohttp loopback round trips/s with C in flight
    commit_rate: float     # SQLite commits/s, one at a time (1 / mean)

    @property
    def latency(self) -> float:
        """4 round trips + 2 commits, from the p50s: the least one unloaded command costs."""
        return 4 * self.rt.p50 + 2 * self.commit.p50

    @property
    def rate(self) -> float:
        """Commands/s if a command's 4 round trips (at the loaded rate) and 2 commits were paid
        one after another on one core: a same-run yardstick, not a bound."""
        return 1.0 / (4.0 / self.rt_rate + 2.0 / self.commit_rate)
