"""End-to-end command benchmark: fake control plane → runner_ref (subprocess) → scripted Hermes.

    python -m bench.e2e_commands [--latency-commands L] [--commands N] [--concurrency C]
                                 [--variant http|rpc|both]

Two phases per variant, each beside its floor measured in the same run on the same machine:
- LATENCY (the unloaded pipeline, one command at a time): per-command p50/p99 (submit → outcome,
  as the control plane's caller sees it) against the latency floor, 4 bare aiohttp loopback
  round trips (poll delivery, admit, the Hermes call, result) + 2 bare SQLite commits (aiosqlite,
  WAL, synchronous=FULL, like the ledger's ``started`` and ``complete``). Target: p99 ≤ 4× floor.
- THROUGHPUT (``--concurrency`` in flight): commands/s, beside the loaded round-trip rate and the
  commit rate. Target: ≥ 1,000 commands/s on 2 cores.
p99 under concurrency includes queueing and is never compared with the latency floor.
Figures only: nothing here asserts a timing. See docs/bench.md.
"""
from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import platform
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.floors import (
    Floors,
    Latency,
    floor_commit,
    floor_round_trip,
    floor_round_trip_rate,
    ms,
)
from bench.processes import Hermes, Runner, cpu_seconds
from fake_server import Command, ControlPlane, Exchange, Outcome

TARGET_RATE = 1000.0  # commands/s on 2 cores
TARGET_RATIO = 4.0  # p99 within 4× the floor


# -- load ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Run:
    variant: str
    concurrency: int
    rate: float
    latency: Latency
    failures: dict[str, int]
    wall: float
    phases: dict[str, Latency]
    cpu: dict[str, float]  # CPU seconds per command, by process
    deliveries: float  # poll deliveries per command (1.0 = no redelivery)
    polls: float  # poll requests per command (1 / the mean batch size)


Send = Callable[[int], Awaitable[Command]]


async def drive(cp: ControlPlane, variant: str, n: int, concurrency: int, send: Send,
                pids: dict[str, int | None]) -> Run:
    """Send ``n`` commands with at most ``concurrency`` in flight; time each from submit."""
    cpu_before = {name: cpu_seconds(pid) for name, pid in pids.items()}
    latencies: list[float] = []
    failures: dict[str, int] = {}
    stamps: dict[str, tuple[float, float]] = {}  # command id → (submitted, answered), wall clock
    next_index = 0
    # the poll hanging when the phase starts began before it: look at every exchange and keep
    # the ones about this phase's commands (and the polls answered during the phase)

    async def worker() -> None:
        nonlocal next_index
        while next_index < n:
            i = next_index
            next_index += 1
            start, wall = time.perf_counter(), time.time()
            handle = await send(i)
            outcome: Outcome = await handle
            latencies.append(time.perf_counter() - start)
            stamps[handle.id] = (wall, time.time())
            if not outcome.ok:
                key = f"{outcome.status} {outcome.code}"
                failures[key] = failures.get(key, 0) + 1

    began, began_wall = time.perf_counter(), time.time()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    wall, ended_wall = time.perf_counter() - began, time.time()
    cpu = {name: (cpu_seconds(pid) - cpu_before[name]) / n for name, pid in pids.items()}
    entries = cp.history.entries
    delivered = sum(1 for ex in entries for cmd in ex.commands if cmd.get("id") in stamps)
    polls = sum(1 for ex in entries if ex.route == "poll" and ex.end_time is not None
                and began_wall <= ex.end_time <= ended_wall)
    return Run(variant, concurrency, n / wall, Latency.of(latencies), failures, wall,
               breakdown(entries, stamps), cpu, delivered / n, polls / n)


async def both_phases(cp: ControlPlane, variant: str, args: argparse.Namespace, send: Send,
                      pids: dict[str, int | None]) -> list[Run]:
    """The unloaded pipeline (one command at a time: latency) and the loaded one (C in flight:
    throughput); either may be skipped with a count of 0."""
    runs = []
    if args.latency_commands:
        runs.append(await drive(cp, variant, args.latency_commands, 1, send, pids))
    if args.commands:
        runs.append(await drive(cp, variant, args.commands, args.concurrency, send, pids))
    return runs


PHASES = ("queued → delivered (poll answered)", "delivered → admit arrives",
          "admit arrives → result arrives", "result arrives → caller resumes")


def breakdown(entries: list[Exchange], stamps: dict[str, tuple[float, float]]) -> dict[str, Latency]:
    """Where a command's time goes, from the control plane's history (its clock is wall time)."""
    delivered: dict[str, float] = {}
    admitted: dict[str, float] = {}
    resulted: dict[str, float] = {}
    for ex in entries:
        if ex.route == "poll" and ex.end_time is not None:
            for cmd in ex.commands:
                delivered.setdefault(str(cmd.get("id")), ex.end_time)
        body = ex.request_body if isinstance(ex.request_body, dict) else {}
        if ex.route == "admit":
            admitted.setdefault(str(body.get("id")), ex.time)
        elif ex.route == "result":
            resulted.setdefault(str(body.get("id")), ex.time)
    spans: list[list[float]] = [[], [], [], []]
    for cid, (submitted, answered) in stamps.items():
        points = (submitted, delivered.get(cid), admitted.get(cid), resulted.get(cid), answered)
        if any(p is None for p in points):
            continue
        for k in range(4):
            spans[k].append(max(0.0, points[k + 1] - points[k]))  # type: ignore[operator]
    return {name: Latency.of(span) for name, span in zip(PHASES, spans, strict=True) if span}


async def measure(args: argparse.Namespace, workdir: Path) -> tuple[list[Run], dict[str, Any]]:
    hermes = Hermes(workdir)
    await hermes.start()
    runs: list[Run] = []
    info: dict[str, Any] = {}
    try:
        async with ControlPlane() as cp:
            reg = await cp.register_runner(name="bench", allowed_profiles=["default"])
            await cp.create_account("bench", allowed_profiles=["default"])
            runner = Runner(workdir, reg.runner_config(hermes_url=hermes.url), args.profile,
                            args.switch_interval)
            await runner.start()
            try:
                await runner.adapter.wait_online(cp, reg.runner_id, timeout=30)
                pids: dict[str, int | None] = {
                    "control plane + client": None, "runner": runner.pid,
                    "scripted Hermes": hermes.pid}
                http = {"path": "/api/status", "method": "GET"}

                async def send_http(i: int) -> Command:
                    return await cp.submit(reg.runner_id, "http", http, account="bench")

                for i in range(args.warmup):
                    await (await send_http(i))
                if args.variant in ("http", "both"):
                    runs += await both_phases(cp, "http GET /api/status", args, send_http, pids)
                if args.variant in ("rpc", "both"):
                    ch = await cp.open_channel(reg.runner_id, account="bench", profile="default")
                    created = await cp.rpc(ch, "session.create",
                                           {"profile": "default", "title": "bench", "cols": 80})
                    if not created.ok or not isinstance(created.result, dict):
                        raise RuntimeError(f"session.create failed: {created}")
                    sid = created.result["session_id"]

                    async def send_rpc(i: int) -> Command:
                        return await cp.submit_rpc(ch, "session.usage", {"session_id": sid})

                    for i in range(args.warmup):
                        await (await send_rpc(i))
                    runs += await both_phases(cp, "gateway.rpc session.usage", args, send_rpc,
                                              pids)
                    await cp.close_channel(ch)
            finally:
                info["runner_exit"] = await runner.stop()
    finally:
        await hermes.stop()
    return runs, info


# -- report ----------------------------------------------------------------------------------
def report(args: argparse.Namespace, floors: Floors, runs: list[Run],
           info: dict[str, Any]) -> None:
    rt, commit, floor = floors.rt, floors.commit, floors.latency
    print(f"# e2e_commands  python {platform.python_version()}  cpus={os.cpu_count()}  "
          f"latency commands={args.latency_commands} (C=1)  throughput commands={args.commands} "
          f"(C={args.concurrency})  loadavg(1m)={os.getloadavg()[0]:.2f}")
    print("## floors (same run)")
    print(f"aiohttp loopback round trip  p50 {ms(rt.p50)}  p99 {ms(rt.p99)}  (n={rt.n}, one at a time)")
    print(f"SQLite commit (WAL, FULL)    p50 {ms(commit.p50)}  p99 {ms(commit.p99)}  (n={commit.n})")
    print(f"latency floor    = 4 round trips + 2 commits: {ms(floor)} (from p50s); "
          f"{ms(4 * rt.p99 + 2 * commit.p99)} (from p99s)")
    print(f"aiohttp loopback round trips at C={args.concurrency}: {floors.rt_rate:8.0f}/s;  "
          f"SQLite commits one at a time: {floors.commit_rate:8.0f}/s")
    print(f"throughput floor = 1 / (4 round trips + 2 commits) at those rates: "
          f"{floors.rate:8.0f} commands/s")
    for run in runs:
        loaded = run.concurrency > 1
        print(f"## {run.variant}  —  {'THROUGHPUT' if loaded else 'LATENCY'} phase, "
              f"concurrency {run.concurrency}")
        print(f"throughput   {run.rate:10.1f} commands/s   ({run.latency.n} in {run.wall:.2f} s)"
              f"   ({run.rate / floors.rate:4.2f}x the throughput floor)")
        print(f"latency      p50 {ms(run.latency.p50)} ({run.latency.p50 / floor:5.1f}x floor)  "
              f"p99 {ms(run.latency.p99)} ({run.latency.p99 / floor:5.1f}x floor)  "
              f"mean {ms(run.latency.mean)}")
        cpu = "  ".join(f"{name} {secs * 1000:.2f} ms" for name, secs in run.cpu.items())
        print(f"CPU/command  {cpu}")
        print(f"deliveries   {run.deliveries:.2f} per command (poll batches carrying it);  "
              f"polls {run.polls:.2f} per command")
        for name, span in run.phases.items():
            print(f"  {name:36s} p50 {ms(span.p50)}  p99 {ms(span.p99)}")
        if run.failures:
            print(f"failures     {run.failures}")
        if loaded:
            verdict = "holds" if run.rate >= TARGET_RATE else "MISSED"
            print(f"target ≥{TARGET_RATE:.0f} commands/s (this phase's throughput): {verdict}")
        else:
            ratio = run.latency.p99 / floor if floor > 0 else float("inf")
            verdict = "holds" if ratio <= TARGET_RATIO else "MISSED"
            print(f"target p99 ≤{TARGET_RATIO:.0f}x latency floor (this phase's p99, "
                  f"{ratio:.1f}x): {verdict}")
    print(f"runner exit code after SIGTERM: {info.get('runner_exit')}")
    if args.profile:
        print(f"runner cProfile written to {args.profile}")
    if args.switch_interval is not None:
        print(f"switch interval {args.switch_interval} s (bench process and runner)")


async def main_async(args: argparse.Namespace) -> int:
    if args.switch_interval is not None:
        sys.setswitchinterval(args.switch_interval)
    with tempfile.TemporaryDirectory(prefix="bench-e2e-") as tmp:
        workdir = Path(tmp)
        rt = await floor_round_trip(args.floor_samples)
        commit = await floor_commit(workdir, max(50, args.floor_samples // 4))
        rt_rate = await floor_round_trip_rate(max(500, args.floor_samples), args.concurrency)
        floors = Floors(rt, commit, rt_rate, 1.0 / commit.mean)
        runs, info = await measure(args, workdir)
        report(args, floors, runs, info)
        if args.keep_logs:
            for name in ("runner.stderr", "hermes.stderr"):
                with contextlib.suppress(OSError):
                    print(f"--- {name}\n{(workdir / name).read_text()[-4000:]}")
    return 0


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--commands", type=int, default=2000,
                    help="commands per variant in the throughput phase (0 skips it)")
    ap.add_argument("--latency-commands", type=int, default=500,
                    help="commands per variant in the latency phase, one at a time (0 skips it)")
    ap.add_argument("--concurrency", type=int, default=32,
                    help="throughput phase: commands in flight (the control plane queues at most "
                         "64 per runner)")
    ap.add_argument("--variant", choices=("http", "rpc", "both"), default="both")
    ap.add_argument("--warmup", type=int, default=50)
    ap.add_argument("--floor-samples", type=int, default=2000)
    ap.add_argument("--profile", default=None, metavar="FILE",
                    help="run the runner under cProfile and write its stats to FILE")
    ap.add_argument("--switch-interval", type=float, default=None, metavar="SECONDS",
                    help="experiment: sys.setswitchinterval in the bench process and the runner")
    ap.add_argument("--keep-logs", action="store_true", help="print the tails of the stderr logs")
    args = ap.parse_args(argv)
    if args.commands < 0 or args.latency_commands < 0 or \
            args.commands + args.latency_commands < 1 or not 1 <= args.concurrency <= 64:
        ap.error("--commands, --latency-commands ≥ 0 (not both 0) and 1 ≤ --concurrency ≤ 64")
    if args.profile and args.switch_interval is not None:
        ap.error("--profile and --switch-interval do not combine")
    return args


def main(argv: list[str] | None = None) -> int:
    return asyncio.run(main_async(parse_args(argv)))


if __name__ == "__main__":
    sys.exit(main())
