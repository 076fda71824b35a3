"""``python -m positive_controls NAME[+NAME…] [--seed N] --config /path/runner.json``: the
reference runner taking the named open choices the other way (or running slow).

NAME is a row or a composite (``contrary``, ``slow``; see :mod:`positive_controls.registry`).
The rows' seams are patched in this process, then ``runner_ref``'s own ``main`` runs with the
remaining arguments. When a slow row is applied, the jitter seed (``--seed`` or a random one)
is printed as a status line first, so a run can be replayed. ``--list`` prints the table.
Exit 2 for an unknown name, a missing one or a bad seed.
"""
from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    from .registry import COMPOSITES, CONTROLS, expand
    if args[:1] == ["--list"]:
        for c in CONTROLS:
            print(f"{c.name:34} {c.group:7} {c.contrary}")
        for name, members in COMPOSITES.items():
            print(f"{name:34} {'composite':7} {'+'.join(members)}")
        return 0
    usage = ("usage: python -m positive_controls NAME[+NAME…] [--seed N] "
             "--config /path/runner.json (or --list)\n")
    try:
        rows = expand(args[0]) if args else ()
    except KeyError as exc:
        sys.stderr.write(f"{exc.args[0]}\n{usage}")
        return 2
    if not rows:
        sys.stderr.write(usage)
        return 2
    rest = args[1:]
    seed: int | None = None
    if rest[:1] == ["--seed"]:
        try:
            seed = int(rest[1])
        except (IndexError, ValueError):
            sys.stderr.write(usage)
            return 2
        rest = rest[2:]
    for row in rows:
        row.apply()
    if any(r.group == "slow" for r in rows):
        from runner_ref import status

        from . import slow
        status.emit(f"positive control {args[0]}: jitter seed {slow.seed(seed)}")
    from runner_ref.__main__ import main as runner_main
    return runner_main(rest)


if __name__ == "__main__":
    sys.exit(main())
