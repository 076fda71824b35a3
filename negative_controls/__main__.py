"""``python -m negative_controls NAME --config /path/runner.json``: the reference runner with
one bug.

The control's seam is patched in this process, then ``runner_ref``'s own ``main`` runs with the
remaining arguments, so the process keeps the reference runner's contract (exit codes, signals,
status lines) apart from the one bug. ``python -m negative_controls --list`` prints the table.
Exit 2 for an unknown name or a missing one.
"""
from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    from .registry import BY_NAME, CONTROLS
    if args[:1] == ["--list"]:
        for c in CONTROLS:
            print(f"{c.name:34} {c.family:15} {','.join(c.cases):28} {c.bug}")
        return 0
    if not args or args[0] not in BY_NAME:
        sys.stderr.write("usage: python -m negative_controls NAME --config /path/runner.json "
                         "(or --list)\n")
        return 2
    BY_NAME[args[0]].apply()
    from runner_ref.__main__ import main as runner_main
    return runner_main(args[1:])


if __name__ == "__main__":
    sys.exit(main())
