"""The self-test's driver: certify a positive control like a vendor runner and count failures.

Rules of this module:
- A control (a row, a composite or ``a+b``) is run as a black box through
  ``python -m conformance certify --profile team-tools`` (the team-tools profile holds every
  core case, so one run certifies both profiles) with
  ``--runner-cmd "<python> -m positive_controls NAME --seed S --config {config}"``; the
  verdicts are read from the bundle's ``results.json``.
- A run is clean when no case has a status other than ``pass``, ``not-applicable`` or
  ``skip``: any ``fail`` — and any harness status (``error``, ``timeout``) — is listed with
  its cause; a correct runner was failed, so each one is a suite defect to report.
- The bundle of a run that was not clean is kept (its path is printed): the transcripts in
  its ``results.json`` name the cause.
- The seed of every run is printed (the jitter of slow rows and certify's own seed), so a run
  can be replayed: ``--seed S`` for both.
- ``python -m positive_controls.verify [NAME …] [--each] [--runs N] [-j N] [--cases PAT]``:
  default the CI composites; ``--each`` adds every row alone (nightly:
  ``contrary slow --each --runs 3``). Exit 1 on any failure.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from .registry import BY_NAME, CI_COMPOSITES, COMPOSITES

ROOT = Path(__file__).resolve().parent.parent
PROFILE = "team-tools"
RUN_TIMEOUT = 1500.0
CLEAN = frozenset({"pass", "not-applicable", "skip", "skipped"})


def runner_cmd(name: str, seed: int) -> str:
    py = shlex.quote(sys.executable)
    return f"{py} -m positive_controls {shlex.quote(name)} --seed {seed} --config {{config}}"


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    for k in ("PYTEST_XDIST_WORKER", "PYTEST_ADDOPTS", "PYTEST_CURRENT_TEST"):
        env.pop(k, None)
    return env


@dataclass
class Run:
    name: str
    seed: int
    seconds: float = 0.0
    counts: dict[str, int] = field(default_factory=dict)
    bad: dict[str, str] = field(default_factory=dict)   # case id → status: cause
    exit_code: int = 0
    kept: str = ""   # the bundle of a run that was not clean (its transcripts name the cause)

    @property
    def clean(self) -> bool:
        return not self.bad and sum(self.counts.values()) > 0

    def row(self) -> str:
        tally = " ".join(f"{k} {v}" for k, v in sorted(self.counts.items()))
        word = "0 failures" if self.clean else f"FAILED {', '.join(sorted(self.bad))}"
        kept = f" bundle {self.kept}" if self.kept else ""
        return (f"{self.name:34} seed {self.seed:<10} {tally:24} {word} "
                f"[{self.seconds:.1f} s, certify exit {self.exit_code}]{kept}")


def _cause(case: dict[str, object]) -> str:
    expected, actual = str(case.get("expected") or ""), str(case.get("actual") or "")
    if expected or actual:
        return f"expected {expected[:120]}; actual {actual[:160]}"
    detail = str(case.get("detail") or "").strip().splitlines()
    return detail[-1][:200] if detail else ""


def certify(name: str, seed: int | None = None, jobs: int | None = None,
            cases: str | None = None, out: Path | None = None) -> Run:
    """One certify run of ``name`` (profile team-tools); the bundle is kept in ``out``."""
    seed = random.SystemRandom().randrange(2**31) if seed is None else seed
    run = Run(name, seed)
    with tempfile.TemporaryDirectory(prefix="posctl-") as tmp:
        bundle = out if out is not None else Path(tmp) / "bundle"
        argv = [sys.executable, "-m", "conformance", "certify", "--profile", PROFILE,
                "--runner-cmd", runner_cmd(name, seed), "--seed", str(seed),
                "--out", str(bundle), "--no-progress"]
        argv += ["-j", str(jobs)] if jobs else []
        argv += ["--cases", cases] if cases else []
        start = time.monotonic()
        proc = subprocess.run(argv, cwd=tmp, env=_env(), capture_output=True, text=True,
                              timeout=RUN_TIMEOUT, check=False)
        run.seconds, run.exit_code = time.monotonic() - start, proc.returncode
        try:
            doc = json.loads((bundle / "results.json").read_text())
        except (OSError, ValueError):
            run.bad["(certify)"] = (f"no results.json (exit {proc.returncode}): "
                                    f"{(proc.stderr or proc.stdout)[-600:]}")
            return run
        for c in doc.get("cases", []):
            run.counts[c["status"]] = run.counts.get(c["status"], 0) + 1
            if c["status"] not in CLEAN:
                run.bad[c["id"]] = f"{c['status']}: {_cause(c)}"
        if run.bad and out is None:   # keep the evidence of a failed correct runner
            run.kept = tempfile.mkdtemp(prefix=f"posctl-{name[:40]}-{seed}-")
            shutil.copytree(bundle, run.kept, dirs_exist_ok=True)
    return run


def report(runs: list[Run], rows: bool = True) -> str:
    lines = [r.row() for r in runs] if rows else []
    for r in runs:
        lines += [f"    {r.name} {cid}: {why}" for cid, why in sorted(r.bad.items())]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m positive_controls.verify")
    p.add_argument("names", nargs="*", help=f"rows or composites (default: {CI_COMPOSITES})")
    p.add_argument("--each", action="store_true", help="every row alone (nightly)")
    p.add_argument("--runs", type=int, default=1, help="runs in a row per control")
    p.add_argument("-j", "--jobs", type=int, default=None, help="certify's workers")
    p.add_argument("--cases", default=None, help="certify --cases PATTERN")
    p.add_argument("--seed", type=int, default=None)
    args = p.parse_args(argv)
    names = (args.names or ([] if args.each else list(CI_COMPOSITES))) \
        + (list(BY_NAME) if args.each else [])
    unknown = [n for part in names for n in part.split("+")
               if n not in BY_NAME and n not in COMPOSITES]
    if unknown:
        p.error(f"no positive control named {', '.join(unknown)}")
    runs: list[Run] = []
    for name in names:
        for _ in range(max(1, args.runs)):
            run = certify(name, args.seed, args.jobs, args.cases)
            print(run.row(), flush=True)
            runs.append(run)
            if not run.clean:
                break   # "N runs in a row" is already lost for this control
    print(report(runs, rows=False))
    return 0 if all(r.clean for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
