"""Stateful steps per second over sockets: the seven family machines against a runner, beside
the runner start-up floor measured in the same run.

    python -m bench.stateful_steps [--profile smoke|ci|certify|thorough] [--families a,b]
                                   [--runner-cmd "CMD --config {config}"] [--floor-runs N]
                                   [--seed N] [--fresh]

Run it from the repository root: `bench` is not an installed package.

Floor: spawn → first poll of the runner (a World's runner started, SIGKILLed, started again and
timed from spawn to the first poll request reaching the control plane), N times, median. A
restart costs at least that; the machines' restarts/s are shown next to 1/floor.
Figures only: nothing here asserts a timing. See docs/properties.md.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

from conformance import hypothesis_profiles
from conformance.kept_worlds import Pool
from conformance.machines.families import MACHINES
from conformance.machines.rig import Rig
from conformance.machines.run import run_machine
from conformance.reference_cmd import REFERENCE_RUNNER_CMD


def startup_floor(runner_cmd: str, runs: int) -> float:
    """Median seconds from spawn to the first poll reaching the control plane."""
    times: list[float] = []
    with Rig(runner_cmd) as rig:
        w = rig.world

        async def once() -> float:
            assert w.runner is not None
            await w.runner.kill()
            before = w.cp.history.last_seq
            t0 = time.perf_counter()
            await w.runner.start()
            await w.cp.history.wait_for(lambda ex: ex.seq > before and ex.route == "poll",
                                        timeout=20)
            dt = time.perf_counter() - t0
            await w.runner.wait_online(w.cp, w.runner_id, 20)
            return dt

        for _ in range(runs):
            times.append(rig.call(once))
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--profile", default="ci", choices=sorted(hypothesis_profiles.PROFILES))
    ap.add_argument("--families", default=",".join(MACHINES))
    ap.add_argument("--runner-cmd", default=REFERENCE_RUNNER_CMD)
    ap.add_argument("--floor-runs", type=int, default=5)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--fresh", action="store_true",
                    help="a fresh world per family (default: one kept world, as pytest runs them)")
    args = ap.parse_args()
    os.environ[hypothesis_profiles.ENV] = args.profile
    floor = startup_floor(args.runner_cmd, args.floor_runs)
    print(f"runner start-up floor (spawn → first poll): {floor * 1000:.0f} ms "
          f"(≤ {1 / floor:.2f} restarts/s)")
    total = {"examples": 0, "steps": 0, "restarts": 0, "server_restarts": 0, "seconds": 0.0}
    t0 = time.perf_counter()
    pool = None if args.fresh else Pool()
    for name in args.families.split(","):
        s = run_machine(MACHINES[name], args.runner_cmd, seed=args.seed, pool=pool)
        for k in total:
            total[k] += s[k]
        print(f"{name:13} examples {s['examples']:3} steps {s['steps']:4} restarts {s['restarts']:2} "
              f"server restarts {s['server_restarts']:2}  {s['steps_per_s']:6.1f} steps/s  "
              f"{s['restarts_per_s']:5.2f} restarts/s")
    if pool is not None:
        pool.close_rigs()
    wall = time.perf_counter() - t0
    sec = total["seconds"] or 1e-9
    print(f"all families ({args.profile}): wall {wall:.1f} s (machines {sec:.1f} s, the rest "
          f"is world starts: one per family with --fresh, else one per world options); {total['examples'] / sec:.2f} examples/s, "
          f"{total['steps'] / sec:.1f} steps/s, {total['restarts'] / sec:.2f} restarts/s; "
          f"start-up floor {floor * 1000:.0f} ms")


if __name__ == "__main__":
    main()
