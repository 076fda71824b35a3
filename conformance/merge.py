"""``python -m conformance merge DIR… [--out DIR]``: join the bundles of ``certify --shard K/N``.

Rules:
- Each DIR is a shard's bundle (its ``results.json`` has ``shard``); the merged bundle is what one
  unsharded run writes: ``results.json`` (the cases of every shard, sorted by ID; ``shards``
  lists the parts), ``junit.xml`` (the shards' test cases in one suite, counts recomputed),
  ``report.html``, ``certificate.json``/``.md`` and ``badge.svg`` (certify's own writers).
- Refused with one line on stderr, exit 2, before anything is written (:func:`problems`, the
  first that holds): a bundle that is not a shard's; bundles whose :data:`SAME` fields differ
  (another runner, seed, profile, harness version, Hermes, baseline, shard count, selection or
  durations file) or whose certified runner identity differs (``--version``, file digests); a
  missing or duplicate shard; a case in two shards; a case a shard ran that was not its own; a
  union of shards that is not the selection each of them recorded.
- A case assigned to a shard that its results do not have (the shard stopped early) is merged
  as ``not-run``: a merged run never passes by leaving a case out.
- The exit code is the merged verdict's (0 PASS or BASELINED, 1 FAIL, 3 INCOMPLETE), as certify's.
"""

from __future__ import annotations

import argparse
import json
import sys
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

from .catalogue import CATALOGUE
from .junit import recount
from .results import VERDICT_BY_NAME, CaseResult, ResultsError, RunResults, dump
from .results import load as load_results
from .shards import fingerprint
from .unrun import not_run

#: (what differs, its value in a shard's bundle) that every shard of one run shares
SAME: tuple[tuple[str, Callable[[Part], Any]], ...] = (
    ("runner command", lambda p: p.results.runner_cmd), ("seed", lambda p: p.results.seed),
    ("profile", lambda p: p.results.profile),
    ("harness version", lambda p: p.results.harness_version),
    ("Hermes", lambda p: p.results.hermes), ("baseline", lambda p: p.results.baseline),
    ("shard count", lambda p: p.shard["total"]), ("selection", lambda p: p.shard["selection"]),
    ("durations file", lambda p: p.shard.get("durations_sha256")),
)


class MergeError(Exception):
    """One line on stderr, exit 2."""


@dataclass
class Part:
    where: str
    results: RunResults
    shard: dict[str, Any]
    identity: dict[str, Any] | None  # certificate.json's runner (None: no certificate)
    junit: Path

    @property
    def name(self) -> str:
        return f"shard {self.shard['index']}/{self.shard['total']} ({self.where})"


def read_part(where: str) -> Part:
    d = Path(where)
    path = d if d.is_file() else d / "results.json"
    try:
        results = load_results(path)
    except ResultsError as exc:
        raise MergeError(str(exc)) from None
    if not isinstance(results.shard, dict):
        raise MergeError(f"{where} is not a shard's bundle (its results.json has no shard: "
                         "run certify --shard K/N)")
    shard = results.shard
    if not (isinstance(shard.get("index"), int) and isinstance(shard.get("total"), int)
            and isinstance(shard.get("cases"), list) and isinstance(shard.get("selection"), dict)
            and all(isinstance(c, str) for c in shard["cases"])):
        raise MergeError(f"{where}: malformed shard in results.json (index, total, cases, "
                         "selection)")
    identity = None
    try:
        identity = json.loads((path.parent / "certificate.json").read_text())["runner"]
    except (OSError, ValueError, KeyError, TypeError):
        pass
    return Part(where, results, results.shard, identity, path.parent / "junit.xml")


def problems(parts: list[Part]) -> Iterator[str]:
    """Why these parts do not make one run (the first is the refusal)."""
    first = parts[0]
    for part in parts[1:]:
        for what, value in SAME:
            if value(part) != value(first):
                yield (f"{part.name} and {first.name} are of different runs: {what} "
                       f"{value(part)!r} vs {value(first)!r}")
        if part.identity and first.identity and {k: part.identity.get(k) for k in (
                "version", "files")} != {k: first.identity.get(k) for k in ("version", "files")}:
            yield (f"{part.name} and {first.name} certified different runners (--version "
                   "or --runner-file digests differ)")
    total = first.shard["total"]
    seen: dict[int, Part] = {}
    for part in parts:
        index = part.shard["index"]
        if index in seen:
            yield f"duplicate shard: {part.name} and {seen[index].name}"
        seen[index] = part
    absent = [str(i) for i in range(1, total + 1) if i not in seen]
    if absent:
        yield f"missing shard{'s' if len(absent) > 1 else ''} {', '.join(absent)} of {total}"
    owner: dict[str, Part] = {}
    for part in parts:
        assigned = set(part.shard["cases"])
        for cid in sorted(assigned):
            if cid in owner:
                yield f"case {cid} is in two shards: {owner[cid].name} and {part.name}"
            owner[cid] = part
        strays = sorted({c.id for c in part.results.cases} - assigned)
        if strays:
            yield f"{part.name} has results for cases not its own: {', '.join(strays[:5])}"
    if fingerprint(owner) != first.shard["selection"]:
        yield (f"the shards' cases ({len(owner)}) are not the selection they recorded "
               f"({first.shard['selection']['count']} cases)")


def unrecorded(part: Part) -> list[CaseResult]:
    """A ``not-run`` record for each case assigned to ``part`` that its results do not have (a
    shard stopped early: ``-x``, or a broken session), so a merged run never passes by omission."""
    have = {c.id for c in part.results.cases}
    return not_run(set(part.shard["cases"]) - have, CATALOGUE,
                   f"not-run: assigned to {part.name}, whose results.json has no record of it "
                   "(the shard stopped early: -x, or its session broke)")


def merged(parts: list[Part]) -> RunResults:
    parts = sorted(parts, key=lambda p: p.shard["index"])
    head = parts[0].results
    return RunResults(
        runner_cmd=head.runner_cmd, profile=head.profile, harness_version=head.harness_version,
        started=min(p.results.started for p in parts), seed=head.seed,
        duration=max(p.results.duration for p in parts), hermes=head.hermes,
        baseline=head.baseline,
        cases=sorted((c for p in parts for c in [*p.results.cases, *unrecorded(p)]),
                     key=lambda c: c.id),
        shards=[{"index": p.shard["index"], "total": p.shard["total"],
                 "cases": len(p.results.cases), "started": p.results.started,
                 "duration": p.results.duration} for p in parts])


def merge_junit(paths: list[Path], out: Path) -> None:
    """The shards' JUnit files as one suite: the first file's, with every other's test cases
    appended and the counts summed."""
    trees = []
    for path in paths:
        try:
            trees.append(ET.parse(path))
        except (OSError, ET.ParseError) as exc:
            raise MergeError(f"cannot read {path}: {exc}") from None
    root = trees[0].getroot()
    suite = root if root.tag == "testsuite" else root.find("testsuite")
    if suite is None:
        raise MergeError(f"{paths[0]} has no testsuite")
    for tree in trees[1:]:
        for case in tree.getroot().iter("testcase"):
            suite.append(case)
    recount(suite)
    cases = list(suite.iter("testcase"))
    suite.set("time", f"{sum(float(c.get('time') or 0) for c in cases):.3f}")
    trees[0].write(out, encoding="utf-8", xml_declaration=True)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise MergeError(message)


def parser() -> argparse.ArgumentParser:
    p = _Parser(prog="python -m conformance merge",
                description="Join the bundles of certify --shard K/N into one bundle.")
    p.add_argument("bundles", nargs="+", metavar="DIR", help="a shard's bundle directory")
    p.add_argument("--out", default="reports", metavar="DIR", help="the merged bundle (reports)")
    return p


def main(argv: list[str] | None = None) -> int:
    from .certify import write_reports
    from .progress import print_summary

    try:
        args = parser().parse_args(argv)
        parts = [read_part(where) for where in args.bundles]
        why = next(problems(parts), None)
        if why is not None:
            raise MergeError(why)
        for part in parts:
            if not part.junit.is_file():
                raise MergeError(f"{part.name} has no junit.xml")
        results = merged(parts)
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        merge_junit([p.junit for p in sorted(parts, key=lambda p: p.shard["index"])],
                    out / "junit.xml")
    except MergeError as exc:
        print(f"merge: error: {exc}", file=sys.stderr)
        return 2
    dump(results, out / "results.json")
    identity = parts[0].identity or {"command": results.runner_cmd, "version": None, "files": {}}
    write_reports(results, identity, out)
    print_summary(results, out)
    return VERDICT_BY_NAME[results.verdict()].exit
