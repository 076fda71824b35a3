"""``python -m conformance compare A/results.json B/results.json [...]``.

A side-by-side matrix of case statuses (one column per run, as Autobahn's and Bowtie's reports
show), and for two runs of one runner the diff: regressions (was passing or not-applicable,
now fail / stale), fixes (was fail or expected-fail, now pass), new and removed cases, other
changes. Exit 1 when the last run regressed against the one before, else 0; 2 on a bad file.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field

from rich.console import Console
from rich.table import Table

from .progress import STYLE
from .results import ResultsError, RunResults
from .results import load as load_results

BAD = ("fail", "stale")
GOOD = ("pass",)


@dataclass
class Diff:
    regressions: list[tuple[str, str, str]] = field(default_factory=list)
    fixes: list[tuple[str, str, str]] = field(default_factory=list)
    new: list[tuple[str, str]] = field(default_factory=list)
    removed: list[tuple[str, str]] = field(default_factory=list)
    changed: list[tuple[str, str, str]] = field(default_factory=list)


def diff(a: RunResults, b: RunResults) -> Diff:
    sa = {c.id: c.status for c in a.cases}
    sb = {c.id: c.status for c in b.cases}
    d = Diff()
    for cid in sorted(sa.keys() | sb.keys()):
        before, after = sa.get(cid), sb.get(cid)
        if before is None and after is not None:
            d.new.append((cid, after))
        elif after is None and before is not None:
            d.removed.append((cid, before))
        elif before != after and before is not None and after is not None:
            if after in BAD and before not in BAD:
                d.regressions.append((cid, before, after))
            elif after in GOOD and before in ("fail", "expected-fail"):
                d.fixes.append((cid, before, after))
            else:
                d.changed.append((cid, before, after))
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


def print_diff(d: Diff, console: Console | None = None) -> None:
    con = console or Console()
    sections = [("regressions", d.regressions), ("fixes", d.fixes), ("changed", d.changed)]
    for title, items in sections:
        con.print(f"{title}: {len(items)}", highlight=False)
        for cid, before, after in items:
            con.print(f"  {cid}: {before} -> {after}", markup=False, highlight=False)
    for title, pairs in (("new cases", d.new), ("removed cases", d.removed)):
        con.print(f"{title}: {len(pairs)}", highlight=False)
        for cid, status in pairs:
            con.print(f"  {cid}: {status}", markup=False, highlight=False)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m conformance compare",
                                description="Compare results.json files side by side.")
    p.add_argument("results", nargs="+", metavar="RESULTS_JSON")
    p.add_argument("--markdown", action="store_true", help="print the matrix as markdown")
    args = p.parse_args(argv)
    try:
        runs = [(path, load_results(path)) for path in args.results]
    except ResultsError as exc:
        print(f"compare: error: {exc}", file=sys.stderr)
        return 2
    if args.markdown:
        sys.stdout.write(matrix_markdown(runs))
    else:
        print_matrix(runs)
    if len(runs) < 2:
        return 0
    d = diff(runs[-2][1], runs[-1][1])
    print_diff(d)
    return 1 if d.regressions else 0
