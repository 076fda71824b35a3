"""``python -m conformance <command>``: ``demo`` (certify arrives with the suite)."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print("usage: python -m conformance demo [--runner-cmd CMD] [--out DIR]")
        return 0 if args else 1
    if args[0] == "demo":
        from .demo import main as demo_main

        return demo_main(args[1:])
    print(f"unknown command: {args[0]}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
