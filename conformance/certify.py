"""``python -m conformance certify``: run the suite against a runner and write the evidence bundle.

It drives the same pytest session as ``pytest --pyargs conformance`` (``pytest.main`` with the
plugin's options) under a live ``rich`` progress display, then adds the reports: ``results.json``
(written by the plugin), ``junit.xml`` (pytest's writer), ``report.html``, ``certificate.json``,
``certificate.md`` and ``badge.svg``. Several ``--runner-cmd`` give one bundle each under
``--out`` plus a side-by-side ``matrix.md``.

Before anything runs, the programs the selected cases need (conformance/environment.py) are
checked: one missing is exit 2 with one line naming its Debian package and the install command,
unless ``--skip-unavailable`` reports those cases ``not-run``.

Exit codes (results.VERDICTS): 0 PASS, or conforms except baselined MUST cases; 1 FAIL (an
applicable MUST fails or a baseline entry is stale); 2 a bad invocation or a missing program
(one line on stderr, never a traceback); 3 INCOMPLETE (no MUST fails, but a case could not be
judged: error, timeout, not-run). With several runners the worst wins (1, then 3, then 0).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import signal
import sys
import tempfile
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NoReturn

import pytest

from . import retry
from .baseline import BaselineError
from .baseline import load as load_baseline
from .bounds import MultiplierError, set_multiplier
from .bounds import parse as parse_multiplier
from .catalogue import CATALOGUE, PROFILES, case_patterns
from .environment import install_line, missing
from .hypothesis_profiles import example_databases
from .junit import replace_cases
from .lanes import default_lanes
from .plugin import load_catalogue
from .process import kill_leftover_groups
from .reference_cmd import REFERENCE_RUNNER_CMD
from .results import VERDICT_BY_NAME, ResultsError, RunResults, dump
from .results import load as load_results
from .retry import DEFAULT_RETRIES
from .session_cmd import Options, ini_text, session_argv
from .shards import ShardError
from .shards import parse as parse_shard
from .transcripts import DEFAULT as TRANSCRIPTS
from .transcripts import POLICIES
from .unrun import padded

USAGE = """\
python -m conformance certify --runner-cmd "CMD … {config} …" [--runner-cmd …]
       [--profile core|team-tools|all] [--baseline FILE] [--cases PATTERN] [-x]
       [--out DIR] [-j N] [--lanes K] [--runner-file PATH …] [--hermes scripted|real[:PATH]] [--seed N]
       [--transcripts failing|all|none] [--timeout-multiplier X] [--retries N] [--skip-unavailable]
       [--soak DURATION] [--example-db DIR|github:OWNER/REPO[/ARTIFACT]|readonly:DIR …]
       [--shard K/N [--durations FILE]]"""


class InvocationError(Exception):
    """A bad invocation: printed as one line, exit 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise InvocationError(message)


def parser() -> argparse.ArgumentParser:
    p = _Parser(prog="python -m conformance certify", usage=USAGE,
                description="Certify a Hermes runner against protocol 1.")
    p.add_argument("--runner-cmd", action="append", default=[], metavar="CMD",
                   help="command template with {config} (repeat to compare runners); "
                        "default: the reference runner")
    p.add_argument("--profile", default="core", choices=sorted(PROFILES))
    p.add_argument("--baseline", metavar="FILE", help="expected failures, one case ID a line")
    p.add_argument("--cases", metavar="PATTERN", help="case IDs to run, e.g. 'GEN-*,DED-001'")
    p.add_argument("-x", "--exitfirst", action="store_true", help="stop at the first failing MUST")
    p.add_argument("--fresh-worlds", action="store_true",
                   help="start the runner afresh for every case (default: consecutive plain "
                        "cases share an idle runner; see docs/certification.md)")
    p.add_argument("--out", default="reports", metavar="DIR", help="bundle directory (reports)")
    p.add_argument("-j", "--jobs", type=int, default=None, metavar="N",
                   help="worker processes (default: one on up to two cores, else two per core, "
                        "fewer for a small selection)")
    p.add_argument("--lanes", type=int, default=None, metavar="K",
                   help="cases in flight in each process (default: three per core in one "
                        "process, two in each of several workers; see docs/certification.md)")
    p.add_argument("--runner-file", action="append", default=[], metavar="PATH",
                   help="file whose sha256 goes on the certificate (repeatable)")
    p.add_argument("--hermes", default="scripted", help="scripted | real[:PATH]")
    p.add_argument("--seed", type=int, help="run seed (printed on every run)")
    p.add_argument("--transcripts", default=TRANSCRIPTS, choices=sorted(POLICIES),
                   help="which cases keep their transcript whole in results.json and report.html: "
                        "failing (default: every case that did not pass), all, none (the others "
                        "keep a digest)")
    p.add_argument("--no-progress", action="store_true", help="no live display")
    p.add_argument("--timeout-multiplier", type=str, default=None, metavar="X",
                   help="scale every bound of the harness by X (a slow machine or runner)")
    p.add_argument("--retries", type=int, default=DEFAULT_RETRIES, metavar="N",
                   help="run the cases the harness could not judge (timeout, error) again, up "
                        f"to N times; never a failure (default {DEFAULT_RETRIES}; 0: the first "
                        "attempt is final)")
    p.add_argument("--skip-unavailable", action="store_true",
                   help="report the cases whose program is not installed as not-run (the "
                        "verdict is then INCOMPLETE, never PASS) instead of exit 2")
    p.add_argument("--soak", default=None, metavar="DURATION",
                   help="rerun the property families and the fault matrix with fresh seeds until "
                        "DURATION (90s, 10m, 1h30m) is spent; failures are saved to the example "
                        "database (docs/certification.md)")
    p.add_argument("--example-db", action="append", default=[], metavar="SPEC",
                   help="Hypothesis example database of the property machines: DIR, "
                        "github:OWNER/REPO[/ARTIFACT] (read-only) or readonly:DIR; repeat to "
                        "join several (default: OUT/hypothesis)")
    p.add_argument("--shard", default=None, metavar="K/N",
                   help="run shard K of N of the selection (a CI matrix; join the bundles with "
                        "python -m conformance merge)")
    p.add_argument("--durations", default=None, metavar="FILE",
                   help="the durations file --shard balances by (default: the shipped one)")
    # engine tests and third-party suites: what to collect, the catalogue, the world factory
    p.add_argument("--suite", default=None, help=argparse.SUPPRESS)
    p.add_argument("--catalogue", default=None, help=argparse.SUPPRESS)
    p.add_argument("--world", default=None, help=argparse.SUPPRESS)
    return p


def check_runner_cmd(cmd: str) -> None:
    if "{config}" not in cmd:
        raise InvocationError(f"--runner-cmd must contain {{config}} (the runner.json path): {cmd!r}")
    try:
        argv = shlex.split(cmd)
    except ValueError as exc:
        raise InvocationError(f"--runner-cmd cannot be parsed: {exc}") from None
    if not argv:
        raise InvocationError("--runner-cmd is empty")
    exe = argv[0]
    if "/" in exe:
        if not (os.path.isfile(exe) and os.access(exe, os.X_OK)):
            raise InvocationError(f"--runner-cmd does not start: {exe} is not an executable file")
    elif shutil.which(exe) is None:
        raise InvocationError(f"--runner-cmd does not start: {exe} is not on PATH")


def check(args: argparse.Namespace) -> None:
    for cmd in args.runner_cmd:
        check_runner_cmd(cmd)
    if args.baseline:
        try:
            load_baseline(args.baseline)
        except BaselineError as exc:
            raise InvocationError(str(exc)) from None
    for path in args.runner_file:
        if not os.path.isfile(path) or not os.access(path, os.R_OK):
            raise InvocationError(f"--runner-file {path} is not a readable file")
    if not re.fullmatch(r"scripted|real(:.+)?", args.hermes):
        raise InvocationError(f"--hermes must be scripted or real[:PATH], not {args.hermes!r}")
    if args.hermes != "scripted":
        from .real_world import resolve_hermes

        found, reason = resolve_hermes(args.hermes)
        if found is None:
            raise InvocationError(f"--hermes {args.hermes}: {reason}")
    if args.jobs is not None and args.jobs < 1:
        raise InvocationError("-j must be at least 1")
    if args.lanes is not None and args.lanes < 1:
        raise InvocationError("--lanes must be at least 1")
    if args.retries < 0:
        raise InvocationError("--retries must be 0 or more")
    if args.timeout_multiplier is not None:
        try:
            args.timeout_multiplier = parse_multiplier(args.timeout_multiplier)
        except MultiplierError as exc:
            raise InvocationError(str(exc)) from None
    if args.soak is not None:
        from .soak import DurationError, parse_duration

        try:
            args.soak = parse_duration(args.soak)
        except DurationError as exc:
            raise InvocationError(str(exc)) from None
        if not soak_selection(args):
            raise InvocationError(f"--soak: no PROP-* or FLT-* case in the selection (profile "
                                  f"{args.profile}{', cases ' + args.cases if args.cases else ''})")
    if args.example_db:
        from .hypothesis_profiles import DatabaseSpecError, open_database

        try:
            open_database(args.example_db)
        except DatabaseSpecError as exc:
            raise InvocationError(str(exc)) from None
    check_shard(args)
    check_environment(args)


def soak_selection(args: argparse.Namespace) -> list[str]:
    from .soak import soaked_cases

    try:
        return soaked_cases(args)
    except Exception:  # noqa: BLE001 - the session itself reports an unloadable catalogue
        return []


def check_shard(args: argparse.Namespace) -> None:
    """``--shard K/N`` parses and N is at most the number of selected cases."""
    if args.shard is None:
        if args.durations is not None:
            raise InvocationError("--durations is only read with --shard K/N")
        return
    try:
        shard = parse_shard(args.shard)
    except ShardError as exc:
        raise InvocationError(str(exc)) from None
    if args.durations is not None and not os.access(args.durations, os.R_OK):
        raise InvocationError(f"--durations {args.durations} is not a readable file")
    try:
        catalogue = load_catalogue(args.catalogue) if args.catalogue else CATALOGUE
    except Exception:  # noqa: BLE001 - the session itself reports an unloadable catalogue
        return
    count = len(catalogue.selection(args.profile, case_patterns(args.cases)))
    if shard.total > count:
        raise InvocationError(f"--shard {args.shard}: {shard.total} shards for {count} "
                              "selected cases (at most one shard a case)")


def check_environment(args: argparse.Namespace) -> None:
    """The programs the selection needs are installed (else one line, exit 2), unless
    ``--skip-unavailable`` (then the session reports those cases not-run)."""
    if args.skip_unavailable:
        return
    try:
        catalogue = load_catalogue(args.catalogue) if args.catalogue else CATALOGUE
    except Exception:  # noqa: BLE001 - the session itself reports an unloadable catalogue
        return
    absent = missing(catalogue.selection(args.profile, case_patterns(args.cases)))
    if absent:
        raise InvocationError(install_line(absent))


#: A worker costs about as much as a few cases to start (a Python process importing the suite,
#: then the collection), so each worker is given at least this many cases.
CASES_PER_WORKER = 6
#: A case mostly waits — on the runner's start-up, its timers, a held poll — so two workers per
#: core finish sooner than one (certify --profile core on 2 cores: 171 s at -j 2, 100 s at -j 4).
WORKERS_PER_CORE = 2
#: On a machine this small one process keeps the cases in flight on lanes (conformance/lanes.py):
#: no worker to start, one pool of kept worlds (certify core on 2 cores: 34 s at -j 4, 28 s at
#: -j 1 --lanes 6).
ONE_PROCESS_CORES = 2


def default_jobs(args: argparse.Namespace, cores: int | None = None) -> int:
    """``-j`` when not given: one process on up to ``ONE_PROCESS_CORES`` cores, else
    ``WORKERS_PER_CORE`` per core, capped so each worker has ``CASES_PER_WORKER`` catalogued
    cases of the selection (``--profile``, ``--cases``, counted in ``--catalogue`` when one is
    given); a catalogue that cannot be loaded here is not counted (no cap: the session reports
    the error)."""
    cores = max(1, cores if cores is not None else (os.cpu_count() or 1))
    if cores <= ONE_PROCESS_CORES:
        return 1
    workers = cores * WORKERS_PER_CORE
    try:  # the catalogue the session selects from (a suite's cases are catalogued in it)
        catalogue = load_catalogue(args.catalogue) if args.catalogue else CATALOGUE
    except Exception:  # noqa: BLE001 - the session itself reports an unloadable catalogue
        return workers
    selected = len(catalogue.selection(args.profile, case_patterns(args.cases)))
    if getattr(args, "shard", None):  # a shard runs about its share
        selected //= parse_shard(args.shard).total
    return max(1, min(workers, selected // CASES_PER_WORKER))


#: the checkout holding the conformance package: the shipped suite's ``--rootdir``
ROOT = Path(__file__).resolve().parent.parent


def session_options(args: argparse.Namespace, cmd: str, out: Path) -> Options:
    """The conformance options of one certify session of ``cmd`` writing to ``out``."""
    return Options(
        runner_cmd=cmd, out=str(out), hermes=args.hermes, profile=args.profile, seed=args.seed,
        transcripts=getattr(args, "transcripts", TRANSCRIPTS), cases=args.cases,
        baseline=args.baseline, exitfirst=args.exitfirst,
        example_dbs=tuple(getattr(args, "example_db", [])),
        soak=getattr(args, "soak_round", False), fresh_worlds=args.fresh_worlds,
        skip_unavailable=args.skip_unavailable, timeout_multiplier=args.timeout_multiplier,
        lanes=getattr(args, "lanes", None),
        runner_files=tuple(args.runner_file), shard=getattr(args, "shard", None),
        durations=getattr(args, "durations", None), catalogue=args.catalogue, world=args.world)


def pytest_args(args: argparse.Namespace, cmd: str, out: Path, ini: Path) -> list[str]:
    """certify's session (conformance/session_cmd.py): no terminal reporter (the progress
    display reports), junit.xml in ``out``, ``-j`` workers."""
    extra = ["-p", "no:terminal", "--junitxml", str(out / "junit.xml"),
             "-o", "junit_suite_name=runner-conformance", "-o", "junit_logging=no"]
    if args.jobs > 1:
        # worksteal: a worker that runs dry takes queued cases from the other, so one long
        # case (a fault-matrix row) near the end does not leave a core idle.
        extra += ["-n", str(args.jobs), "--dist", "worksteal"]
    return session_argv(session_options(args, cmd, out), ini=str(ini), rootdir=str(ROOT),
                        suite=args.suite, extra=extra)


INI = ini_text()


def run_one(args: argparse.Namespace, cmd: str, out: Path) -> RunResults | None:
    from .progress import Progress

    out.mkdir(parents=True, exist_ok=True)
    stale = out / "results.json"
    if stale.exists():
        stale.unlink()
    with tempfile.TemporaryDirectory(prefix="conformance-ini-") as tmp:
        ini = Path(tmp) / "pytest.ini"
        ini.write_text(INI)
        progress = Progress(enabled=not args.no_progress, label=cmd)
        with progress:
            code = pytest.main(pytest_args(args, cmd, out, ini), plugins=[progress])
    if code == pytest.ExitCode.INTERRUPTED:
        # a case stopped mid-way never closed its world: its runner would keep this process
        # (the threads that wait on it) alive after the bundle is written
        kill_leftover_groups()
    try:
        recorded = load_results(out / "results.json")
    except ResultsError:
        return None
    interrupted = code == pytest.ExitCode.INTERRUPTED
    results = recorded if interrupted else run_again(args, cmd, out, recorded)
    whole = pad_unrun(args, results, interrupted=interrupted)
    if whole is not recorded:
        dump(whole, out / "results.json")
    return whole


def run_again(args: argparse.Namespace, cmd: str, out: Path, results: RunResults) -> RunResults:
    """The cases the harness could not judge, run again up to ``--retries`` times
    (:mod:`conformance.retry`), each round in a session of its own writing to a temporary
    directory; their last records folded into ``results`` and their testcases into the run's
    junit.xml."""
    for _ in range(args.retries):  # check() refused a negative count
        ids = retry.unjudged(results)
        if not ids:
            break
        if len(ids) > (cap := retry.most(len(results.cases))):
            print(f"certify: not running again the {len(ids)} case(s) the harness could not "
                  f"judge: more than {cap} of {len(results.cases)} "
                  "(the runner or this machine is not working; see their causes)",
                  file=sys.stderr)
            break
        print(f"certify: running again {len(ids)} case(s) the harness could not judge: "
              f"{', '.join(ids)}", file=sys.stderr)
        again_args = argparse.Namespace(**{
            **vars(args), "cases": ",".join(ids), "jobs": min(args.jobs, len(ids)),
            "retries": 0, "shard": None, "exitfirst": False,
            "example_db": example_databases(args.example_db, out)})
        with tempfile.TemporaryDirectory(prefix="conformance-retry-") as tmp:
            again = run_one(again_args, cmd, Path(tmp))
            if again is None:
                break
            results = retry.fold(results, again)
            replace_cases(out / "junit.xml", Path(tmp) / "junit.xml")
    return results


def pad_unrun(args: argparse.Namespace, results: RunResults, *, interrupted: bool) -> RunResults:
    """The run with a ``not-run`` record for each selected case it did not record
    (conformance/unrun.py): a run stopped early never passes by leaving cases out."""
    catalogue = load_catalogue(args.catalogue) if args.catalogue else CATALOGUE
    expected = {row.id for row in catalogue.selection(args.profile, case_patterns(args.cases))}
    if getattr(args, "shard", None):
        if results.shard is None:
            return results  # the shard's share is unknown here; merge pads what it recorded
        expected &= set(results.shard["cases"])
    why = ("the session was interrupted (Ctrl-C, SIGINT or SIGTERM) before it ran this case"
           if interrupted else "the session ended without running this case (-x, or a worker "
           "broke)")
    results, added = padded(results, expected, catalogue, f"not-run: {why}")
    if added:
        print(f"certify: {added} selected case(s) did not run: {why}", file=sys.stderr)
    return results


def soak_one(args: argparse.Namespace, cmd: str, out: Path) -> RunResults | None:
    """``--soak``: rounds of the PROP-* and FLT-* cases until the time is spent (conformance/soak.py)."""
    from . import soak

    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="conformance-ini-") as tmp:
        ini = Path(tmp) / "pytest.ini"
        ini.write_text(INI)

        def session(rnd: argparse.Namespace, c: str, where: Path) -> list[str]:
            where.mkdir(parents=True, exist_ok=True)
            return pytest_args(rnd, c, where, ini)

        results = soak.run(args, cmd, out, session)
    if results is not None:
        from .results import dump

        dump(results, out / "results.json")
    return results


def runner_identity(cmd: str, files: list[str]) -> dict[str, Any]:
    """What the certificate says the runner is: its command, ``--version`` line, file digests."""
    from .report.certificate import runner_version, sha256_files

    return {"command": cmd, "version": runner_version(cmd), "files": sha256_files(files)}


def write_bundle(results: RunResults, args: argparse.Namespace, cmd: str, out: Path) -> None:
    write_reports(results, runner_identity(cmd, args.runner_file), out)


def write_reports(results: RunResults, identity: dict[str, Any], out: Path) -> None:
    """certificate.json and .md, report.html and badge.svg of ``results`` (certify, merge)."""
    from .report import render_html
    from .report.badge import certification_badge
    from .report.certificate import certificate, certificate_md

    date = datetime.now(UTC).isoformat(timespec="seconds")
    cert = certificate(results, identity, date)
    (out / "certificate.json").write_text(json.dumps(cert, indent=2) + "\n")
    (out / "certificate.md").write_text(certificate_md(cert))
    (out / "report.html").write_text(render_html(results, identity=identity))
    mp, mt = results.level_figures("MUST")
    (out / "badge.svg").write_text(certification_badge(results.profile, mp, mt, results.ok()))


def slug(i: int, cmd: str) -> str:
    words = [w for w in re.split(r"[^A-Za-z0-9]+", " ".join(shlex.split(cmd)[:3])) if w]
    return f"{i + 1}-" + "-".join(words[-3:])[:40]


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: list[str] | None = None) -> int:
    from .progress import print_summary

    try:
        args = parser().parse_args(argv)
        args.runner_cmd = args.runner_cmd or [REFERENCE_RUNNER_CMD]
        check(args)
        if args.jobs is None:  # a soak's rounds run its PROP-* and FLT-* cases only
            args.jobs = default_jobs(argparse.Namespace(
                **{**vars(args), "cases": ",".join(soak_selection(args))}) if args.soak else args)
        if args.lanes is None:
            args.lanes = default_lanes(args.jobs)
    except InvocationError as exc:
        print(f"certify: error: {exc}", file=sys.stderr)
        return 2
    if args.seed is None:
        args.seed = int.from_bytes(os.urandom(4), "big")
    # a CI system cancels a job with SIGTERM: ended as Ctrl-C is (INCOMPLETE, runners killed)
    signal.signal(signal.SIGTERM, _interrupt)
    if args.timeout_multiplier is not None:
        set_multiplier(args.timeout_multiplier)  # this process's bounds too (world start-up)
    root = Path(args.out)
    runs: list[tuple[str, Path, RunResults]] = []
    for i, cmd in enumerate(args.runner_cmd):
        out = root if len(args.runner_cmd) == 1 else root / slug(i, cmd)
        results = soak_one(args, cmd, out) if args.soak else run_one(args, cmd, out)
        if results is None:
            print(f"certify: error: the suite did not run for {cmd!r} (see the output above)",
                  file=sys.stderr)
            return 2
        if not results.cases:
            print(f"certify: error: no case selected (profile {args.profile}"
                  f"{', cases ' + args.cases if args.cases else ''})", file=sys.stderr)
            return 2
        write_bundle(results, args, cmd, out)
        print_summary(results, out)
        if (again := retry.summary_line(results)) is not None:
            print(again)
        if results.soak is not None:
            from .soak import print_findings

            print_findings(results)
        runs.append((cmd, out, results))
    if len(runs) > 1:
        from .compare import matrix_markdown, print_matrix

        named = [(str(out.name), res) for _, out, res in runs]
        (root / "matrix.md").write_text(matrix_markdown(named))
        print_matrix(named)
    return exit_code(res for _, _, res in runs)


#: the exit codes of the verdicts, worst first: several runners exit with the worst
EXIT_ORDER = (1, 3, 0)


def exit_code(runs: Iterable[RunResults]) -> int:
    codes = {VERDICT_BY_NAME[res.verdict()].exit for res in runs}
    return next((c for c in EXIT_ORDER if c in codes), 0)
