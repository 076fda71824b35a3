"""``python -m conformance compare A/results.json B/results.json``: the release diff.

Rules:
- Two files: every case whose status changed from A to B, each with its cause in A and in B
  (:func:`cause`: the first line of ``actual`` with ``expected``, else of ``detail``), then the
  cases only in A or only in B. Three or more: the side-by-side matrix of statuses (one column per
  run, as Autobahn's and Bowtie's reports show; ``--matrix`` or ``--markdown`` with two), then
  the diff of the last two.
- A **new failure** is a case that was not failing in A (any other status, or absent) and is
  failing in B: a status of :data:`FAILING`. Exit 1 when B has one (for a vendor's CI between
  releases), else 0; 2 on bad input, with one line on stderr and no traceback.
- Both schema versions are read (a version-1 bundle of an older release included).
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field
from typing import NoReturn

from rich.console import Console
from rich.table import Table

from .progress import STYLE
from .results import CaseResult, ResultsError, RunResults
from .results import load as load_results

#: statuses that are a failure of the runner (a new one of these between releases exits 1)
FAILING = frozenset({"fail", "error", "timeout"})
CAUSE_WIDTH = 240


def cause(c: CaseResult | None) -> str:
    """One line that says why ``c`` has its status ("" for a plain pass, "absent" for none)."""
    if c is None:
        return "absent"
    if c.actual:
        head = c.actual.splitlines()[0] if c.actual.strip() else c.actual
        text = f"{head} (expected {c.expected.splitlines()[0]})" if c.expected else head
    else:
        text = next((ln for ln in c.detail.splitlines() if ln.strip()), "")
    return text if len(text) <= CAUSE_WIDTH else text[: CAUSE_WIDTH - 1] + "…"


@dataclass
class Change:
    id: str
    before: CaseResult | None
    after: CaseResult | None

    @property
    def statuses(self) -> tuple[str, str]:
        return (self.before.status if self.before else "absent",
                self.after.status if self.after else "absent")

    @property
    def new_failure(self) -> bool:
        was, now = self.statuses
        return now in FAILING and was not in FAILING


@dataclass
class Diff:
    changes: list[Change] = field(default_factory=list)  # status changed, or only in one run

    @property
    def new_failures(self) -> list[Change]:
        return [c for c in self.changes if c.new_failure]

    def only(self, side: str) -> list[Change]:
        return [c for c in self.changes if (c.before if side == "after" else c.after) is None]

    @property
    def changed(self) -> list[Change]:
        return [c for c in self.changes if c.before is not None and c.after is not None]


def diff(a: RunResults, b: RunResults) -> Diff:
    ca, cb = {c.id: c for c in a.cases}, {c.id: c for c in b.cases}
    d = Diff()
    for cid in sorted(ca.keys() | cb.keys()):
        before, after = ca.get(cid), cb.get(cid)
        if before is None or after is None or before.status != after.status:
            d.changes.append(Change(cid, before, after))
    return d


def matrix(runs: list[tuple[str, RunResults]]) -> tuple[list[str], list[list[str]]]:
    ids = sorted({c.id for _, r in runs for c in r.cases})
    status = [{c.id: c.status for c in r.cases} for _, r in runs]
    rows = [[cid, *(s.get(cid, "—") for s in status)] for cid in ids]
    return ["case", *(name for name, _ in runs)], rows


def matrix_markdown(runs: list[tuple[str, RunResults]]) -> str:
    head, rows = matrix(runs)
    lines = ["# Runner comparison", ""]
    lines += [f"- **{name}**: `{r.runner_cmd}` — MUST {r.level_figures('MUST')[0]}/"
              f"{r.level_figures('MUST')[1]}, {'PASS' if r.ok() else 'FAIL'}" for name, r in runs]
    lines += ["", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def print_matrix(runs: list[tuple[str, RunResults]], console: Console | None = None) -> None:
    con = console or Console()
    head, rows = matrix(runs)
    table = Table(title="side by side", title_justify="left")
    for h in head:
        table.add_column(h)
    for row in rows:
        table.add_row(row[0], *(f"[{STYLE.get(s, 'dim')}]{s}[/]" for s in row[1:]))
    con.print(table)


def _summary(name: str, r: RunResults) -> str:
    (mp, mt), (sp, st) = r.level_figures("MUST"), r.level_figures("SHOULD")
    return (f"{name}: {'PASS' if r.ok() else 'FAIL'}  MUST {mp}/{mt}  SHOULD {sp}/{st}  "
            f"{len(r.cases)} cases  harness {r.harness_version or '?'}  {r.started}")


def diff_lines(d: Diff, a: tuple[str, RunResults], b: tuple[str, RunResults]) -> list[str]:
    """The release diff as plain lines (what ``compare`` prints for two files)."""
    out = [f"A {_summary(*a)}", f"B {_summary(*b)}", ""]
    new = d.new_failures
    out.append(f"{len(d.changed)} case(s) changed status, {len(new)} new failure(s)")
    for ch in d.changes:
        was, now = ch.statuses
        case = ch.after or ch.before
        assert case is not None
        mark = ("NEW FAILURE" if ch.new_failure else "only in B" if ch.before is None else
                "only in A" if ch.after is None else "fixed" if now == "pass" else "changed")
        out.append(f"  {mark:11}  {ch.id} [{case.level}] {was} -> {now}  {case.requirement}")
        out.append(f"      A: {cause(ch.before) or '(passed)'}")
        out.append(f"      B: {cause(ch.after) or '(passed)'}")
    if new:
        out.append(f"new failures: {', '.join(c.id for c in new)} (exit 1)")
    else:
        out.append("no new failure (exit 0)")
    return out


class CompareError(Exception):
    """Bad input: one line on stderr, exit 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise CompareError(message)


def parser() -> argparse.ArgumentParser:
    p = _Parser(prog="python -m conformance compare",
                description="The release diff of two results.json files (a matrix for more).")
    p.add_argument("results", nargs="+", metavar="RESULTS_JSON")
    p.add_argument("--matrix", action="store_true", help="also print the side-by-side matrix")
    p.add_argument("--markdown", action="store_true", help="print the matrix as markdown")
    return p


def main(argv: list[str] | None = None) -> int:
    try:
        args = parser().parse_args(argv)
        runs = [(path, load_results(path)) for path in args.results]
    except (CompareError, ResultsError) as exc:
        print(f"compare: error: {exc}", file=sys.stderr)
        return 2
    if args.markdown:
        sys.stdout.write(matrix_markdown(runs))
    elif args.matrix or len(runs) != 2:
        print_matrix(runs)
    if len(runs) < 2:
        return 0
    d = diff(runs[-2][1], runs[-1][1])
    if not args.markdown:
        for line in diff_lines(d, runs[-2], runs[-1]):
            print(line)
    return 1 if d.new_failures else 0
