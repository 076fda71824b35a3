"""How fast certify and the conformance suite are, A/B against a baseline, beside the floor.

    python bench/certify_speed.py [--against REF] [--runs 3] [--what certify,pytest]
                                  [--profile core] [-j N] [--starts 5] [--runner-cmd "… {config}"]
                                  [--keep]

Sides. B is this checkout (the one this file is in). With ``--against REF`` (a git ref or commit,
the baseline: "today") A is a temporary ``git worktree add --detach`` of REF, removed at the end,
on an error or Ctrl-C too. Every measured process of a side runs with ``cwd`` = that side's root
and ``PYTHONPATH`` = that root first, so it imports that side's ``conformance``, ``runner_ref``
and ``fixtures`` (PYTHONPATH wins over the editable install, whose finder comes last on
``sys.meta_path``); the floor child reports where its imports came from, printed once per side.
Before measuring, each side's packages are compiled to bytecode as ``scripts/setup.sh`` does
(a fresh worktree has none, and this machine sets ``PYTHONDONTWRITEBYTECODE``), and for
``pytest`` the suite is collected once, untimed (pytest's rewritten test modules are cached).

1. Floor, once per side: the runner (``--runner-cmd``; by default the side's
   ``python -m runner_ref --config {config}``) is spawned against a live control plane and
   scripted Hermes and timed spawn → first poll, ``--starts`` times. A case that starts a runner
   can never cost less.
2. ``--runs`` rounds, the sides in turn (A, B, A, B …) so the machine's load falls on both alike,
   of each command of ``--what``:
   - ``certify``: ``python -m conformance certify --runner-cmd CMD --profile P [-j N]
     --no-progress --out TMP`` (without ``-j`` each side's certify picks its own): wall, user and
     system CPU of it and all it started (``os.wait4``: the runners included), exit code, the
     verdict line, cases, cases/s, and the per-case overhead (the mean case duration from
     ``results.json`` minus the side's floor median).
   - ``pytest``: ``python -m pytest conformance -n 2 -q -p no:cacheprovider``, the maintainers'
     form (``-p no:cacheprovider`` is already in pyproject's ``addopts``; it is spelled out as CI
     does). ``pytest conformance`` needs no extra flag: pyproject's ``addopts`` loads the
     conformance plugin (reference runner, scripted Hermes, profile ``all``), and the root
     ``conftest.py`` turns ``-n 2`` into ``--dist worksteal``; it also collects
     ``conformance/acceptance``, which skips itself unless ``HERMES_TEAM_RUNNER=1``, so that
     variable is removed from the measured processes' environment. Wall, CPU, exit code, and
     pytest's summary line.
3. A table: every figure's median (min–max) per side and the ratio B/A of the medians (below 1:
   B is faster or cheaper), with the issue's targets beside the walls.

Figures only; nothing is asserted (speed is measured by benchmarks, never by timed tests).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import resource
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from conformance.reference_cmd import REFERENCE_RUNNER_CMD

REPO = Path(__file__).resolve().parents[1]
DEFAULT_CMD = REFERENCE_RUNNER_CMD
WHATS = ("certify", "pytest")
PYTEST_ARGS = ("-m", "pytest", "conformance", "-n", "2", "-q", "-p", "no:cacheprovider")
#: the issue's targets for this 2-core machine, seconds of wall time
TARGETS = {"certify core": 25.0, "pytest": 60.0}
#: what scripts/setup.sh compiles
COMPILED = ("fake_server", "runner_ref", "conformance", "fixtures", "negative_controls")
FLOOR_MARK = "certify-speed-floor "


# ---- the pure parts (tests/test_bench_certify_speed.py) -----------------------------------

def parse_what(text: str) -> tuple[str, ...]:
    """``certify,pytest`` → the commands to measure, in the fixed order of :data:`WHATS`."""
    names = {w.strip() for w in text.split(",") if w.strip()}
    unknown = names - set(WHATS)
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"--what takes a comma-separated subset of {','.join(WHATS)}, not {text!r}")
    return tuple(w for w in WHATS if w in names)


def counting_cmd(runner_cmd: str, tally: Path) -> str:
    """``runner_cmd`` started by ``sh``, which appends one byte to ``tally`` and then ``exec``s
    it: the same process (the harness's signals reach the runner itself), about a millisecond of
    CPU more per start, on both sides alike. The tally's size is the run's runner starts."""
    script = f'printf . >> {shlex.quote(str(tally))}; exec "$0" "$@"'
    return f"sh -c {shlex.quote(script)} {runner_cmd}"


def cpu_floor(starts: int, start_cpu: float, cores: int) -> float:
    """Every runner start's CPU spread over every core: an estimate of the wall no harness can
    beat without starting the runner fewer times (the probe's runner lives to its first poll
    and a stop; a runner that refuses its config exits sooner, so it may be an over-estimate)."""
    return starts * start_cpu / max(1, cores)


def positive(text: str) -> int:
    n = int(text)
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {n}")
    return n


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--against", metavar="REF", default=None,
                    help="baseline git ref or commit (side A, a temporary worktree); "
                         "without it only this checkout is measured")
    ap.add_argument("--runs", type=positive, default=3, help="rounds, sides in turn (default 3)")
    ap.add_argument("--what", type=parse_what, default=WHATS, metavar="certify,pytest",
                    help="commands to measure (default both)")
    ap.add_argument("--runner-cmd", default=DEFAULT_CMD,
                    help="runner command template with {config} (default: each side's "
                         "python -m runner_ref)")
    ap.add_argument("--profile", default="core")
    ap.add_argument("-j", "--jobs", type=positive, default=None,
                    help="certify's -j (default: not given, each side's certify picks its own)")
    ap.add_argument("--starts", type=positive, default=5, help="runner start-ups for the floor")
    ap.add_argument("--keep", action="store_true",
                    help="keep the work directory (bundles, logs) instead of removing it")
    ap.add_argument("--floor-only", action="store_true", help=argparse.SUPPRESS)
    return ap


def spread(values: Sequence[float]) -> tuple[float, float, float] | None:
    """(median, min, max), or None for no values."""
    if not values:
        return None
    return statistics.median(values), min(values), max(values)


def cell(values: Sequence[float], fmt: str) -> str:
    """``55.3 (55.2–61.0)``: the median, then min–max when there is more than one value."""
    s = spread(values)
    if s is None:
        return "–"
    med, lo, hi = s
    if len(values) == 1:
        return format(med, fmt)
    return f"{med:{fmt}} ({lo:{fmt}}–{hi:{fmt}})"


def ratio(a: Sequence[float], b: Sequence[float]) -> str:
    """B/A of the medians, ``–`` when either side has none or A's is 0."""
    sa, sb = spread(a), spread(b)
    if sa is None or sb is None or sa[0] == 0:
        return "–"
    return f"{sb[0] / sa[0]:.2f}"


@dataclass
class Row:
    label: str
    per_side: list[list[float]]
    fmt: str = ".1f"


def format_table(sides: Sequence[str], rows: Sequence[Row]) -> list[str]:
    """One line per figure: the label, each side's cell, and B/A when there are two sides."""
    head = ["figure", *sides] + (["B/A"] if len(sides) == 2 else [])
    body = [[r.label, *(cell(v, r.fmt) for v in r.per_side)]
            + ([ratio(r.per_side[0], r.per_side[1])] if len(sides) == 2 else []) for r in rows]
    widths = [max(len(line[i]) for line in [head, *body]) for i in range(len(head))]
    return ["  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                      for i, (c, w) in enumerate(zip(line, widths, strict=True))).rstrip()
            for line in [head, *body]]


VERDICT_RE = re.compile(r"\bprofile \S+\s+MUST \d+/\d+")
PYTEST_RE = re.compile(r"\b(passed|failed|errors?|skipped|deselected|no tests ran)\b.* in [\d.]+s")


def verdict_line(output: str) -> str:
    """certify's verdict line (``CONFORMS  profile core  MUST …``), or ``(no verdict line)``."""
    found = [ln.strip() for ln in output.splitlines() if VERDICT_RE.search(ln)]
    return found[-1] if found else "(no verdict line)"


def pytest_summary(output: str) -> str:
    """pytest's last summary line (``209 passed, 12 skipped in 80.12s``), its ``=`` stripped."""
    found = [ln.strip(" =") for ln in output.splitlines() if PYTEST_RE.search(ln)]
    return found[-1] if found else "(no summary line)"


def target_note(what: str, profile: str) -> str:
    key = f"certify {profile}" if what == "certify" else what
    return f"  (target ≤ {TARGETS[key]:.0f} s)" if key in TARGETS else ""


# ---- measuring ----------------------------------------------------------------------------

@dataclass
class Side:
    name: str  # "A" or "B"
    label: str
    root: Path
    floor: list[float] = field(default_factory=list)
    floor_cpu: list[float] = field(default_factory=list)  # CPU of one runner life, s
    imports: str = ""

    def start_cpu(self) -> float:
        return statistics.median(self.floor_cpu) if self.floor_cpu else 0.0


@dataclass
class Measured:
    wall: float
    user: float
    system: float
    rc: int
    output: str


def side_env(root: Path) -> dict[str, str]:
    """The environment of a side's processes: its root first on PYTHONPATH (any other checkout
    of this project dropped from it), HERMES_TEAM_RUNNER unset, wide lines for rich."""
    env = dict(os.environ)
    rest = [p for p in env.get("PYTHONPATH", "").split(os.pathsep)
            if p and not (Path(p) / "conformance" / "certify.py").exists()]
    env["PYTHONPATH"] = os.pathsep.join([str(root), *rest])
    env.pop("HERMES_TEAM_RUNNER", None)
    env["COLUMNS"] = "250"
    return env


def run_measured(argv: Sequence[str], side: Side, log: Path) -> Measured:
    """Run ``argv`` in ``side`` (own process group, output to ``log``) and reap it with
    ``os.wait4``: wall time, user and system CPU of it and every process it waited for. Ctrl-C
    is passed on to its group (SIGKILL after 15 s) before it propagates."""
    with log.open("wb") as out:
        t0 = time.perf_counter()
        proc = subprocess.Popen(list(argv), cwd=side.root, env=side_env(side.root),
                                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        except BaseException:
            stop_group(proc.pid)
            raise
        wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    text = log.read_text(errors="replace")
    return Measured(wall, usage.ru_utime, usage.ru_stime, proc.returncode, text)


def stop_group(pid: int) -> None:
    for sig, grace in ((signal.SIGINT, 15.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(pid, sig)
        except ProcessLookupError:
            pass
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            try:
                if os.waitpid(pid, os.WNOHANG)[0]:
                    return
            except ChildProcessError:
                return
            time.sleep(0.1)


def git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(REPO), *args], check=True, capture_output=True,
                          text=True).stdout.strip()


def this_label() -> str:
    try:
        head = git("rev-parse", "--short", "HEAD")
        dirty = git("status", "--porcelain", "--untracked-files=no")
    except (subprocess.CalledProcessError, FileNotFoundError):
        return f"this checkout {REPO}"
    return f"this checkout {REPO} (HEAD {head}{' + uncommitted changes' if dirty else ''})"


def add_worktree(ref: str, work: Path) -> Side:
    sha = git("rev-parse", "--verify", "--short", f"{ref}^{{commit}}")
    path = work / f"A-{sha}"
    git("worktree", "add", "--detach", str(path), sha)
    name = ref if ref == sha else f"{ref} ({sha})"
    return Side("A", f"{name}, the baseline, in a temporary worktree {path}", path)


def remove_worktree(path: Path) -> None:
    try:
        git("worktree", "remove", "--force", str(path))
    except subprocess.CalledProcessError:
        shutil.rmtree(path, ignore_errors=True)
        subprocess.run(["git", "-C", str(REPO), "worktree", "prune"], check=False)


def prepare(args: argparse.Namespace, side: Side, work: Path) -> None:
    """Bytecode, as scripts/setup.sh compiles it, and for ``pytest`` one untimed collection
    (it writes pytest's assertion-rewritten test modules, which the first timed run of a fresh
    worktree would otherwise write); then the floor, measured in a child process that imports
    the side's harness (it reports where its imports came from)."""
    dirs = [d for d in COMPILED if (side.root / d).is_dir()]
    run_measured([sys.executable, "-m", "compileall", "-q", "-j", "0", *dirs], side,
                 work / f"{side.name}-compile.log")
    if "pytest" in args.what:
        run_measured([sys.executable, *PYTEST_ARGS[:3], "--collect-only", "-q",
                      "-p", "no:cacheprovider"], side, work / f"{side.name}-collect.log")
    data = measure_floor(args, side, work, "floor")
    if data is None:
        return
    side.floor = [float(x) for x in data["floor"]]
    where = data["imports"]
    odd = [n for n, f in where.items() if not str(f).startswith(str(side.root))]
    side.imports = ", ".join(f"{n} from {f}" for n, f in where.items()) + (
        f"  — NOT FROM THIS SIDE: {', '.join(odd)}" if odd else "")


def measure_floor(args: argparse.Namespace, side: Side, work: Path,
                  tag: str) -> dict[str, Any] | None:
    """The floor child's figures (spawn → first poll, and each runner life's CPU, which is added
    to ``side.floor_cpu``), or None when it failed (said on stdout)."""
    argv = [sys.executable, str(Path(__file__).resolve()), "--floor-only",
            "--starts", str(args.starts), "--runner-cmd", args.runner_cmd]
    m = run_measured(argv, side, work / f"{side.name}-{tag}.log")
    lines = [ln for ln in m.output.splitlines() if ln.startswith(FLOOR_MARK)]
    if m.rc or not lines:
        print(f"{side.name}  floor: failed (exit {m.rc}):\n{tail(m.output)}")
        return None
    data: dict[str, Any] = json.loads(lines[-1][len(FLOOR_MARK):])
    side.floor_cpu += [float(x) for x in data.get("cpu", ())]
    return data


def tail(text: str, n: int = 15) -> str:
    return "\n".join("    " + ln for ln in text.rstrip().splitlines()[-n:])


def floor_only(runner_cmd: str, starts: int) -> int:
    """The child of :func:`prepare`: spawn → first poll of the runner, ``starts`` times on one
    world, and where ``conformance`` and ``runner_ref`` are imported from (as the runner, whose
    cwd is its state directory, finds the latter), one marked JSON line."""
    import importlib.util

    import conformance
    from conformance.worlds import open_world

    def children_cpu() -> float:
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        return usage.ru_utime + usage.ru_stime

    async def measure() -> tuple[list[float], list[float]]:
        figures: list[float] = []
        cpu: list[float] = []
        async with open_world(runner_cmd=runner_cmd, start_runner=False) as world:
            for _ in range(starts):
                after = world.cp.history.last_seq
                c0 = children_cpu()
                t0 = time.perf_counter()
                await world.start_runner(wait_online=False)
                await world.cp.history.wait_for(
                    lambda ex: ex.route == "poll" and ex.runner_id == world.runner_id,
                    timeout=30.0, after_seq=after)
                figures.append(time.perf_counter() - t0)
                assert world.runner is not None
                await world.runner.stop()  # reaped: its CPU is in RUSAGE_CHILDREN now
                cpu.append(children_cpu() - c0)
        return figures, cpu

    floor, cpu = asyncio.run(measure())
    spec = importlib.util.find_spec("runner_ref")
    imports = {"conformance": conformance.__file__,
               "runner_ref": spec.origin if spec else None}
    print(FLOOR_MARK + json.dumps({"floor": floor, "cpu": cpu, "imports": imports}), flush=True)
    return 0


@dataclass
class RunFigures:
    side: str
    what: str
    m: Measured
    cases: int = 0
    mean_case: float = 0.0
    starts: int = 0  # runner processes started (certify)
    start_cpu: float = 0.0  # one runner life's CPU, measured just before this run, s


def run_certify(args: argparse.Namespace, side: Side, work: Path, i: int) -> RunFigures:
    # the start-up CPU again right before the run: this machine's speed moves within minutes
    probe = measure_floor(args, side, work, f"floor-{i}")
    start_cpu = statistics.median(probe["cpu"]) if probe and probe.get("cpu") else side.start_cpu()
    out = work / f"{side.name}-certify-{i}"
    tally = work / f"{side.name}-certify-{i}.starts"
    argv = [sys.executable, "-m", "conformance", "certify",
            "--runner-cmd", counting_cmd(args.runner_cmd, tally),
            "--profile", args.profile, *(["-j", str(args.jobs)] if args.jobs else []),
            "--no-progress", "--out", str(out)]
    m = run_measured(argv, side, work / f"{side.name}-certify-{i}.log")
    results = json.loads((out / "results.json").read_text()) \
        if (out / "results.json").exists() else {}
    raw = results.get("cases")
    cases = [c for c in raw if isinstance(c, dict)] if isinstance(raw, list) else []
    durations = [float(c.get("duration") or 0.0) for c in cases]
    return RunFigures(side.name, "certify", m, len(cases),
                      statistics.mean(durations) if durations else 0.0,
                      tally.stat().st_size if tally.exists() else 0, start_cpu)


def run_pytest(args: argparse.Namespace, side: Side, work: Path, i: int) -> RunFigures:
    m = run_measured([sys.executable, *PYTEST_ARGS], side, work / f"{side.name}-pytest-{i}.log")
    return RunFigures(side.name, "pytest", m)


def report_run(args: argparse.Namespace, i: int, r: RunFigures, side: Side) -> None:
    m = r.m
    load = os.getloadavg()[0]
    head = f"run {i}  {r.side}  "
    if r.what == "certify":
        flo = statistics.median(side.floor) if side.floor else 0.0
        print(f"{head}certify --profile {args.profile}{f' -j {args.jobs}' if args.jobs else ''}"
              f"  exit {m.rc}  wall {m.wall:.1f} s{target_note('certify', args.profile)}  "
              f"cpu user {m.user:.1f} s sys {m.system:.1f} s  cases {r.cases}  "
              f"cases/s {r.cases / m.wall if m.wall else 0:.2f}  loadavg(1m)={load:.2f}")
        if r.cases:
            print(f"{' ' * len(head)}per case  mean duration {r.mean_case * 1000:.0f} ms = floor "
                  f"{flo * 1000:.0f} ms + overhead {(r.mean_case - flo) * 1000:.0f} ms")
        cores = os.cpu_count() or 1
        print(f"{' ' * len(head)}cpu floor  {r.starts} runner starts × {r.start_cpu * 1000:.0f}"
              f" ms start-up CPU / {cores} cores ≈ "
              f"{cpu_floor(r.starts, r.start_cpu, cores):.1f} s;  all its CPU / {cores} cores "
              f"= {(m.user + m.system) / cores:.1f} s (the wall with every core busy)")
        print(f"{' ' * len(head)}verdict  {verdict_line(m.output)}")
    else:
        print(f"{head}pytest conformance -n 2  exit {m.rc}  wall {m.wall:.1f} s"
              f"{target_note('pytest', args.profile)}  cpu user {m.user:.1f} s sys "
              f"{m.system:.1f} s  loadavg(1m)={load:.2f}")
        print(f"{' ' * len(head)}{pytest_summary(m.output)}")
    if m.rc != 0:
        print(f"{' ' * len(head)}last lines of its output:\n{tail(m.output)}")
    sys.stdout.flush()


def summary_rows(args: argparse.Namespace, sides: Sequence[Side],
                 runs: Sequence[RunFigures]) -> list[Row]:
    cores = os.cpu_count() or 1

    def per(what: str, fig: str) -> list[list[float]]:
        out: list[list[float]] = []
        for s in sides:
            mine = [r for r in runs if r.side == s.name and r.what == what]
            flo = statistics.median(s.floor) if s.floor else 0.0
            values = {"wall": [r.m.wall for r in mine], "user": [r.m.user for r in mine],
                      "sys": [r.m.system for r in mine],
                      "cases": [float(r.cases) for r in mine],
                      "cases/s": [r.cases / r.m.wall for r in mine if r.m.wall],
                      "starts": [float(r.starts) for r in mine],
                      "floor": [cpu_floor(r.starts, r.start_cpu, cores) for r in mine],
                      "busy": [(r.m.user + r.m.system) / cores for r in mine],
                      "overhead": [(r.mean_case - flo) * 1000 for r in mine if r.cases]}
            out.append(values[fig])
        return out

    rows = [Row("floor: runner start-up, ms (spawn → first poll)",
                [[x * 1000 for x in s.floor] for s in sides], ".0f"),
            Row("floor: runner start-up CPU, ms (one runner's life)",
                [[x * 1000 for x in s.floor_cpu] for s in sides], ".0f")]
    if "certify" in args.what:
        name = f"certify {args.profile}"
        rows += [Row(f"{name} wall, s{target_note('certify', args.profile)}", per("certify", "wall")),
                 Row(f"{name} cpu user, s", per("certify", "user")),
                 Row(f"{name} cpu sys, s", per("certify", "sys")),
                 Row(f"{name} cases", per("certify", "cases"), ".0f"),
                 Row(f"{name} cases/s", per("certify", "cases/s"), ".2f"),
                 Row(f"{name} runner starts", per("certify", "starts"), ".0f"),
                 Row(f"{name} cpu floor ≈, s (starts × start-up CPU / {cores} cores)",
                     per("certify", "floor")),
                 Row(f"{name} all CPU / {cores} cores, s", per("certify", "busy")),
                 Row(f"{name} per-case overhead, ms", per("certify", "overhead"), ".0f")]
    if "pytest" in args.what:
        rows += [Row(f"pytest conformance -n 2 wall, s{target_note('pytest', args.profile)}",
                     per("pytest", "wall")),
                 Row("pytest conformance -n 2 cpu user, s", per("pytest", "user")),
                 Row("pytest conformance -n 2 cpu sys, s", per("pytest", "sys"))]
    return rows


def bench(args: argparse.Namespace, work: Path) -> int:
    sides: list[Side] = []
    if args.against:
        try:
            sides.append(add_worktree(args.against, work))
        except subprocess.CalledProcessError as exc:
            print(f"certify_speed: cannot check out {args.against!r}: {exc.stderr.strip()}",
                  file=sys.stderr)
            return 2
    sides.append(Side("B", this_label(), REPO))
    print(f"# certify_speed  python {sys.version.split()[0]}  cpus={os.cpu_count()}  "
          f"loadavg(1m)={os.getloadavg()[0]:.2f}  runs={args.runs}  what={','.join(args.what)}")
    for s in sides:
        print(f"{s.name} = {s.label}")
    for s in sides:
        prepare(args, s, work)
        print(f"{s.name}  imports {s.imports or '(unknown: the floor child failed)'}")
        f = spread(s.floor)
        if f:
            print(f"{s.name}  floor  runner start-up (spawn → first poll)  median {f[0] * 1000:.0f}"
                  f" ms  min {f[1] * 1000:.0f} ms  max {f[2] * 1000:.0f} ms  (n={len(s.floor)});"
                  f"  CPU of one runner's life (start, first poll, stop) median "
                  f"{s.start_cpu() * 1000:.0f} ms")
    sys.stdout.flush()
    runs: list[RunFigures] = []
    for i in range(1, args.runs + 1):
        for what in args.what:
            for s in sides:
                r = (run_certify if what == "certify" else run_pytest)(args, s, work, i)
                runs.append(r)
                report_run(args, i, r, s)
    print(f"## median (min–max) over {args.runs} run(s)"
          + ("; B/A = ratio of the medians (< 1: B is faster)" if len(sides) == 2 else "")
          + f"  loadavg(1m)={os.getloadavg()[0]:.2f}")
    for line in format_table([f"{s.name}" for s in sides], summary_rows(args, sides, runs)):
        print(line)
    for what in args.what:
        codes = "  ".join(f"{s.name}: " + " ".join(str(r.m.rc) for r in runs
                                                  if r.side == s.name and r.what == what)
                          for s in sides)
        print(f"exit codes {what}  {codes}")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.floor_only:
        return floor_only(args.runner_cmd, args.starts)
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # SIGTERM cleans up like Ctrl-C
    work = Path(tempfile.mkdtemp(prefix="certify-bench-"))
    try:
        return bench(args, work)
    except KeyboardInterrupt:
        print("certify_speed: interrupted", file=sys.stderr)
        return 130
    finally:
        # a second Ctrl-C must not leave the worktree behind
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
        for path in work.glob("A-*"):  # the baseline's worktree, however far it got
            remove_worktree(path)
        if args.keep:
            print(f"kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
