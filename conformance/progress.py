"""certify's terminal face: a live ``rich`` progress display (a pytest plugin object) and the
end-of-run summary. The display goes to stderr; the summary to stdout."""

from __future__ import annotations

from pathlib import Path
from types import TracebackType
from typing import Any

import pytest
from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)
from rich.progress import Progress as RichProgress
from rich.table import Table

from .causes import cause_lines
from .report import family_table
from .results import STATUSES, RunResults, verdict_line

STYLE = {"pass": "green", "fail": "bold red", "error": "bold bright_red", "timeout": "bold cyan",
         "not-run": "blue", "not-applicable": "dim", "expected-fail": "yellow", "stale": "magenta"}
#: the verdict's colour (results.VERDICTS)
VERDICT_STYLE = {"pass": "green", "baselined": "yellow", "incomplete": "bold cyan",
                 "fail": "bold red"}


class Progress:
    """Pytest plugin: advances one bar per finished case, counting verdicts as they come."""

    def __init__(self, *, enabled: bool, label: str) -> None:
        self.enabled = enabled
        self.console = Console(stderr=True)
        self.bar = RichProgress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
                                MofNCompleteColumn(), TextColumn("{task.fields[tally]}"),
                                TimeElapsedColumn(), console=self.console, transient=False,
                                disable=not enabled)
        self.task = self.bar.add_task(label[:60], total=None, tally="")
        self.tally: dict[str, int] = {}

    def __enter__(self) -> Progress:
        self.bar.start()
        return self

    def __exit__(self, t: type[BaseException] | None, e: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.bar.stop()

    def pytest_collection_finish(self, session: Any) -> None:
        self.bar.update(self.task, total=len(session.items))

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        self.bar.update(self.task, total=len(ids))

    def pytest_runtest_logreport(self, report: Any) -> None:
        if report.when != "teardown":
            return
        data = getattr(report, "conformance", None)
        status = data["status"] if isinstance(data, dict) else "pass"
        self.tally[status] = self.tally.get(status, 0) + 1
        tally = " ".join(f"[{STYLE[s]}]{s} {n}[/]" for s, n in sorted(self.tally.items()))
        desc = data["id"] if isinstance(data, dict) else report.nodeid[-30:]
        self.bar.update(self.task, advance=1, tally=tally, description=desc)


def print_summary(results: RunResults, out: Path, console: Console | None = None) -> None:
    """The family table, the verdict line, then the causes folded (the most common first)."""
    con = console or Console()
    table = Table(title=f"{results.runner_cmd}", title_justify="left")
    columns = [s for s in STATUSES if s == "pass" or any(c.status == s for c in results.cases)]
    for col in ("family", *columns):
        table.add_column(col, justify="left" if col == "family" else "right")
    for row in family_table(results):
        table.add_row(str(row["family"]), *(str(row[c]) for c in columns))
    con.print(table)
    (mp, mt), (sp, st) = results.level_figures("MUST"), results.level_figures("SHOULD")
    counts = ", ".join(f"{n} {s}" for s, n in results.counts().items() if n and s != "pass")
    verdict = f"[{VERDICT_STYLE[results.verdict()]}]{escape(verdict_line(results))}[/]"
    con.print(f"{verdict}  profile {results.profile}  MUST {mp}/{mt}  SHOULD {sp}/{st}"
              f"{'  (' + counts + ')' if counts else ''}  seed {results.seed}  bundle {out}/",
              highlight=False)
    for line in cause_lines(results.cases):
        con.print(line, markup=False, highlight=False, soft_wrap=True)
