"""How fast certify is, beside the floor measured in the same run: the runner's own start-up.

    python bench/certify_speed.py [--profile core] [-j N] [--starts 5] [--runner-cmd "… {config}"]

1. Floor: spawn the runner under test against a live control plane and scripted Hermes and time
   spawn → first poll, ``--starts`` times (median, min, max). A case that starts a runner can
   never cost less than this.
2. ``python -m conformance certify --profile P -j N --no-progress --out TMP`` as one process:
   wall time, user and system CPU of it and all it started (runners included), cases run,
   cases per second, the load average after it, and the per-case overhead — the mean case duration
   from ``results.json`` minus the floor (what the harness adds around one runner start).

Figures only; nothing is asserted (speed is measured by benchmarks, never by timed tests).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from conformance.certify import WORKERS_PER_CORE
from conformance.reference_cmd import REFERENCE_RUNNER_CMD
from conformance.worlds import open_world

REPO = Path(__file__).resolve().parents[1]


async def startup_floor(runner_cmd: str, starts: int) -> list[float]:
    """spawn → first poll of the runner, measured ``starts`` times on one world."""
    figures: list[float] = []
    async with open_world(runner_cmd=runner_cmd, start_runner=False) as world:
        for _ in range(starts):
            after = world.cp.history.last_seq
            t0 = time.perf_counter()
            await world.start_runner(wait_online=False)
            await world.cp.history.wait_for(
                lambda ex: ex.route == "poll" and ex.runner_id == world.runner_id,
                timeout=30.0, after_seq=after)
            figures.append(time.perf_counter() - t0)
            assert world.runner is not None
            await world.runner.stop()
    return figures


def run_certify(runner_cmd: str, profile: str,
                jobs: int) -> tuple[float, tuple[float, float], dict[str, object], int]:
    """Wall time, (user, sys) CPU seconds of certify and everything it started, results, exit."""
    out = Path(tempfile.mkdtemp(prefix="certify-bench-"))
    argv = [sys.executable, "-m", "conformance", "certify", "--runner-cmd", runner_cmd,
            "--profile", profile, "-j", str(jobs), "--no-progress", "--out", str(out)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime)
    results = json.loads((out / "results.json").read_text()) if (out / "results.json").exists() else {}
    return wall, cpu, results, proc.returncode


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runner-cmd", default=REFERENCE_RUNNER_CMD)
    ap.add_argument("--profile", default="core")
    ap.add_argument("-j", "--jobs", type=int, default=(os.cpu_count() or 1) * WORKERS_PER_CORE,
                    help="certify's -j (default: certify's own for a whole profile, "
                         f"{WORKERS_PER_CORE} per core)")
    ap.add_argument("--starts", type=int, default=5)
    args = ap.parse_args(argv)

    floor = asyncio.run(startup_floor(args.runner_cmd, args.starts))
    med = statistics.median(floor)
    print(f"# certify_speed  python {sys.version.split()[0]}  cpus={os.cpu_count()}  "
          f"loadavg(1m)={os.getloadavg()[0]:.2f}")
    print(f"floor  runner start-up (spawn → first poll)  median {med * 1000:.0f} ms  "
          f"min {min(floor) * 1000:.0f} ms  max {max(floor) * 1000:.0f} ms  (n={len(floor)})")

    wall, (user, system), results, rc = run_certify(args.runner_cmd, args.profile, args.jobs)
    raw = results.get("cases")
    cases = list(raw) if isinstance(raw, list) else []
    n = len(cases)
    durations = [float(c.get("duration") or 0.0) for c in cases if isinstance(c, dict)]
    mean = statistics.mean(durations) if durations else 0.0
    print(f"certify --profile {args.profile} -j {args.jobs}  exit {rc}  wall {wall:.1f} s  "
          f"cases {n}  cases/s {n / wall if wall else 0:.2f}  "
          f"cpu user {user:.1f} s sys {system:.1f} s  loadavg(1m)={os.getloadavg()[0]:.2f}")
    print(f"per case  mean duration {mean * 1000:.0f} ms  = floor {med * 1000:.0f} ms "
          f"+ overhead {(mean - med) * 1000:.0f} ms  ({mean / med if med else 0:.1f}× the floor)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
