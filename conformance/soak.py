"""``certify --soak DURATION``: the property families and the fault matrix, again and again with
fresh seeds, until the time is spent; what fails is saved and replays first everywhere after.

Rules:
- ``DURATION`` is ``90s``, ``10m``, ``1h`` or a sum of them (``1h30m``); anything else is a bad
  invocation (:class:`DurationError`, one line, exit 2).
- A soak is rounds. A round is one pytest session of the suite (certify's own options) over the
  selected ``PROP-*`` and ``FLT-*`` cases (``--cases`` narrows them), with a fresh run seed and
  ``--conformance-soak`` (the matrix draws its cell order from the case seed); its bundle goes to
  ``<out>/soak/round-N/``. Once the time is spent a round takes no new case (the cases in flight
  finish) and no round starts.
- Every round reads and writes one example database: ``--example-db`` as given, else
  ``<out>/hypothesis``. A machine failure is saved there under the case's stable key
  (conformance/hypothesis_profiles.py), so a later plain certify reading that database replays
  it first and shrinks from it. A case that failed is not run again; the soak ends early when
  every selected case has failed.
- The live display counts rounds, examples, steps and restarts and names what was found; each
  finding prints the one command that replays it (:func:`replay_command`).
- ``<out>/results.json`` holds, per case, its failing record if it ever failed, else its last
  one, and ``soak``: the duration, every round's seed and figures, and the findings.
"""

from __future__ import annotations

import argparse
import re
import shlex
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from . import hypothesis_profiles
from .catalogue import CATALOGUE, case_patterns
from .plugin import load_catalogue
from .results import CaseResult, ResultsError, RunResults
from .results import load as load_results

SOAKED = ("PROP-", "FLT-")
UNITS = {"h": 3600, "m": 60, "s": 1}
_PART = re.compile(r"(\d+)([hms])")
#: summed over the cases of a round: a machine's examples (its pinned stories included) and
#: steps, a matrix row's cells, and the runner restarts of both
FIGURES = ("examples", "steps", "cells", "restarts")


class DurationError(ValueError):
    """A ``--soak`` value that is not a duration (one line)."""


def parse_duration(text: str) -> float:
    s = text.strip().lower()
    parts = _PART.findall(s)
    if not s or "".join(n + u for n, u in parts) != s:
        raise DurationError(f"--soak {text!r} is not a duration (e.g. 90s, 10m, 1h30m)")
    seconds = float(sum(int(n) * UNITS[u] for n, u in parts))
    if seconds <= 0:
        raise DurationError(f"--soak {text!r} must be longer than 0 s")
    return seconds


def soaked_cases(args: argparse.Namespace) -> list[str]:
    """The PROP-* and FLT-* case IDs of the selection (``--profile``, ``--cases``)."""
    catalogue = load_catalogue(args.catalogue) if args.catalogue else CATALOGUE
    rows = catalogue.selection(args.profile, case_patterns(args.cases))
    return sorted(r.id for r in rows if r.id.startswith(SOAKED))


def replay_command(args: argparse.Namespace, cmd: str, case_id: str, dbs: list[str],
                   seed: int) -> str:
    """The one command that replays a soak's finding: the saved example runs first."""
    hermes = "" if args.hermes == "scripted" else f" --hermes {shlex.quote(args.hermes)}"
    return (f"python -m conformance certify --runner-cmd {shlex.quote(cmd)} --profile "
            f"{args.profile} --cases {case_id}"
            + "".join(f" --example-db {shlex.quote(d)}" for d in dbs) + f" --seed {seed}{hermes}")


class SoakProgress:
    """Pytest plugin over every round: the live counts, and the stop once the time is spent."""

    def __init__(self, *, enabled: bool, seconds: float, label: str) -> None:
        self.deadline = time.monotonic() + seconds
        self.totals = dict.fromkeys(FIGURES, 0)
        self.round = 0
        self.found: list[str] = []
        self.session: Any = None
        self.bar = Progress(TextColumn("{task.description}"), BarColumn(),
                            TextColumn("{task.fields[figures]}"), TimeElapsedColumn(),
                            TimeRemainingColumn(), console=Console(stderr=True),
                            disable=not enabled)
        self.task = self.bar.add_task(f"soak {label[:40]}", total=seconds, figures="")
        self.started = time.monotonic()

    def spent(self) -> bool:
        return time.monotonic() >= self.deadline

    def refresh(self) -> None:
        t = self.totals
        found = f"  [bold red]found {', '.join(self.found)}[/]" if self.found else ""
        self.bar.update(self.task, completed=min(time.monotonic() - self.started,
                                                  self.bar.tasks[0].total or 0),
                        figures=f"round {self.round}  examples {t['examples']}  steps "
                                f"{t['steps']}  cells {t['cells']}  restarts {t['restarts']}"
                                f"{found}")

    def pytest_sessionstart(self, session: Any) -> None:
        self.session = session

    def pytest_runtest_logreport(self, report: Any) -> None:
        data = getattr(report, "conformance", None)
        if report.when != "teardown" or not isinstance(data, dict):
            return
        figures = data.get("data") or {}
        for k in FIGURES:
            self.totals[k] += int(figures.get(k, 0) or 0)
        if data.get("status") == "fail":
            self.found.append(str(data["id"]))
        if self.spent() and self.session is not None:
            self.session.shouldstop = "soak: the time is spent"
            dsession = self.session.config.pluginmanager.getplugin("dsession")
            if dsession is not None:
                dsession.shouldstop = "soak: the time is spent"
        self.refresh()


def run(args: argparse.Namespace, cmd: str, out: Path,
        session_args: Callable[[argparse.Namespace, str, Path], list[str]]) -> RunResults | None:
    """Soak ``cmd``; ``session_args(args, cmd, round_out)`` gives one round's pytest argv."""
    todo = soaked_cases(args)
    if not todo:
        return None
    dbs = hypothesis_profiles.example_databases(args.example_db, out)
    progress = SoakProgress(enabled=not args.no_progress, seconds=args.soak, label=cmd)
    rounds: list[dict[str, Any]] = []
    found: list[dict[str, Any]] = []
    kept: dict[str, CaseResult] = {}
    first: RunResults | None = None
    with progress.bar:
        while todo and not progress.spent():
            progress.round += 1
            seed = hypothesis_profiles.fresh_seed()
            rnd = argparse.Namespace(**{**vars(args), "seed": seed, "cases": ",".join(todo),
                                        "example_db": dbs, "soak_round": True})
            where = out / "soak" / f"round-{progress.round}"
            started = time.monotonic()
            pytest.main(session_args(rnd, cmd, where), plugins=[progress])
            try:
                res = load_results(where / "results.json")
            except ResultsError:
                return None
            first = first or res
            rounds.append(_round(progress.round, seed, time.monotonic() - started, res))
            for case in res.cases:
                if case.status == "fail" and case.id not in {f["case"] for f in found}:
                    found.append(_finding(args, cmd, case, progress.round, seed, dbs))
                if kept.get(case.id) is None or kept[case.id].status != "fail":
                    kept[case.id] = case
            todo = [c for c in todo if c not in {f["case"] for f in found}]
    assert first is not None
    first.cases = [kept[c] for c in sorted(kept)]
    first.duration = round(time.monotonic() - progress.started, 3)
    first.soak = {"duration": args.soak, "elapsed": first.duration, "example_db": dbs,
                  "seeds": [r["seed"] for r in rounds], "rounds": rounds, "found": found,
                  **{k: sum(r[k] for r in rounds) for k in FIGURES}}
    return first


def _round(n: int, seed: int, seconds: float, res: RunResults) -> dict[str, Any]:
    figures = {k: sum(int((c.data or {}).get(k, 0) or 0) for c in res.cases) for k in FIGURES}
    return {"round": n, "seed": seed, "seconds": round(seconds, 3), **figures,
            "statuses": {c.id: c.status for c in res.cases}}


def _finding(args: argparse.Namespace, cmd: str, case: CaseResult, n: int, seed: int,
             dbs: list[str]) -> dict[str, Any]:
    data = case.data or {}
    return {"case": case.id, "round": n, "seed": seed, "case_seed": case.seed,
            "actual": case.actual, "first_failing_example": data.get("first_failing_example"),
            "replay": replay_command(args, cmd, case.id, dbs, seed)}


def print_findings(results: RunResults, console: Console | None = None) -> None:
    con = console or Console()
    soak = results.soak or {}
    con.print(f"soak: {len(soak.get('rounds', []))} rounds, {soak.get('examples', 0)} examples, "
              f"{soak.get('steps', 0)} steps, {soak.get('cells', 0)} matrix cells, "
              f"{soak.get('restarts', 0)} restarts in "
              f"{soak.get('elapsed', 0):.0f} s; seeds {' '.join(map(str, soak.get('seeds', [])))}",
              highlight=False)
    for f in soak.get("found", []):
        con.print(f"found {f['case']} in round {f['round']} (seed {f['seed']}): {f['actual']}",
                  markup=False, highlight=False)
        con.print(f"  replay: {f['replay']}", markup=False, highlight=False, soft_wrap=True)
