"""``python -m conformance <command>``.

  certify        run the suite against a runner, write the evidence bundle (docs/certification.md)
  compare        side-by-side matrix and diff of results.json files
  merge          join the bundles of certify --shard K/N into one bundle
  durations      refresh the durations file --shard balances by, from results.json files
  cases          the case catalogue (--markdown prints docs/conformance-cases.md, --write rewrites it)
  baseline       a baseline of the failing cases of a results.json (to adopt the suite)
  spec-coverage  MUST/SHOULD sentences of a markdown spec without case IDs
  environment    the external programs the cases need, and which are missing (scripts/setup.sh)
  demo           the end-to-end walkthrough
"""

from __future__ import annotations

import sys

USAGE = """\
usage: python -m conformance <command> [options]

commands:
  certify --runner-cmd "CMD … {config} …" [--profile core|team-tools|all] [--baseline FILE]
          [--cases PATTERN] [-x] [--out DIR] [-j N] [--runner-file PATH …]
          [--hermes scripted|real[:PATH]] [--seed N] [--shard K/N]
  compare A/results.json B/results.json [--markdown]
  merge DIR… [--out DIR]
  durations RESULTS_JSON… [-o FILE]
  cases [--markdown | --write]
  baseline RESULTS_JSON [-o FILE]
  spec-coverage FILE.md
  environment [--profile core|team-tools|all] [--with PROGRAM …] [--missing-packages]
  demo [--runner-cmd CMD] [--out DIR]"""


def _cases(args: list[str]) -> int:
    from .casedoc import DOC, markdown
    from .catalogue import CATALOGUE

    if args == ["--markdown"]:
        sys.stdout.write(markdown(CATALOGUE))
    elif args == ["--write"]:
        DOC.write_text(markdown(CATALOGUE))
        print(f"wrote {len(CATALOGUE)} cases to docs/{DOC.name}")
    elif not args:
        for c in CATALOGUE:
            print(f"{c.id}  {c.level:6} {c.feature:12} {c.requirement}")
        print(f"{len(CATALOGUE)} cases", file=sys.stderr)
    else:
        print("usage: python -m conformance cases [--markdown | --write]", file=sys.stderr)
        return 2
    return 0


def _baseline(args: list[str]) -> int:
    import argparse

    from .baseline import render
    from .results import ResultsError, load

    p = argparse.ArgumentParser(prog="python -m conformance baseline")
    p.add_argument("results")
    p.add_argument("-o", "--output", help="write here instead of stdout")
    ns = p.parse_args(args)
    try:
        res = load(ns.results)
    except ResultsError as exc:
        print(f"baseline: error: {exc}", file=sys.stderr)
        return 2
    text = render((c.id for c in res.cases if c.status in ("fail", "expected-fail")),
                  header=f"expected failures of {res.runner_cmd}\nfrom a run of {res.started}")
    if ns.output:
        with open(ns.output, "w", encoding="utf-8") as fh:
            fh.write(text)
    else:
        sys.stdout.write(text)
    return 0


def _durations(args: list[str]) -> int:
    """Each results.json replaces its profile's durations (the case durations it recorded)."""
    import argparse
    from pathlib import Path

    from .results import ResultsError, load
    from .shards import DURATIONS, ShardError, refreshed

    p = argparse.ArgumentParser(prog="python -m conformance durations")
    p.add_argument("results", nargs="+", metavar="RESULTS_JSON")
    p.add_argument("-o", "--output", default=str(Path(__file__).parent / DURATIONS),
                   help="the durations file to update (default: the shipped one)")
    ns = p.parse_args(args)
    out = Path(ns.output)
    try:
        runs = [load(path) for path in ns.results]
        text = refreshed(out.read_text(encoding="utf-8") if out.exists() else None,
                         ((r.profile, {c.id: c.duration for c in r.cases}) for r in runs),
                         "seconds per case ID of a certify run, per profile: what --shard K/N "
                         "balances by (python -m conformance durations RESULTS_JSON… refreshes "
                         "it)")
    except (ResultsError, ShardError, OSError) as exc:
        print(f"durations: error: {exc}", file=sys.stderr)
        return 2
    out.write_text(text)
    for r in runs:
        print(f"{r.profile}: {len(r.cases)} cases, {sum(c.duration for c in r.cases):.1f} s "
              f"(seed {r.seed}, {r.runner_cmd})")
    print(f"wrote {out}")
    return 0


def _environment(args: list[str]) -> int:
    import argparse

    from .catalogue import CATALOGUE, PROFILES
    from .environment import HOUSE_PROGRAMS, PROGRAMS, installed, needed

    p = argparse.ArgumentParser(prog="python -m conformance environment")
    p.add_argument("--profile", default="core", choices=sorted(PROFILES))
    p.add_argument("--with", dest="extra", action="append", default=[],
                   choices=sorted(HOUSE_PROGRAMS), help="a program of the house tests too")
    p.add_argument("--missing-packages", action="store_true",
                   help="print only the Debian packages to install, one line")
    ns = p.parse_args(args)
    need = needed(CATALOGUE.in_profile(ns.profile))
    names = sorted(need) + sorted(set(ns.extra))
    table = {**PROGRAMS, **HOUSE_PROGRAMS}
    if ns.missing_packages:
        print(" ".join(sorted({table[n].package for n in names if not installed(n)})))
        return 0
    for name in sorted(table):
        prog = table[name]
        users = ", ".join(need.get(name, [])) or ("house tests" if name in HOUSE_PROGRAMS else "-")
        state = "installed" if installed(name) else "MISSING"
        print(f"{name:10} {state:9} Debian {prog.package:10} {prog.why}; needed by {users}")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(USAGE)
        return 0 if args else 1
    cmd, rest = args[0], args[1:]
    if cmd == "demo":
        from .demo import main as demo_main

        return demo_main(rest)
    if cmd == "certify":
        from .preflight import problem

        if (why := problem(rest)) is not None:
            print(f"certify: error: {why}", file=sys.stderr)
            return 2
        from .certify import main as certify_main

        return certify_main(rest)
    if cmd == "compare":
        from .compare import main as compare_main

        return compare_main(rest)
    if cmd == "merge":
        from .merge import main as merge_main

        return merge_main(rest)
    if cmd == "durations":
        return _durations(rest)
    if cmd == "spec-coverage":
        from .spec_coverage import main as coverage_main

        return coverage_main(rest)
    if cmd == "cases":
        return _cases(rest)
    if cmd == "baseline":
        return _baseline(rest)
    if cmd == "environment":
        return _environment(rest)
    print(f"unknown command: {cmd} (python -m conformance --help)", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
