"""tests/positive_controls: the self-test's runs are printed as one table at the end of the
session (control, seed, tally, verdict, time)."""
from __future__ import annotations

from typing import Any


def pytest_terminal_summary(terminalreporter: Any) -> None:
    rows = []
    for reports in terminalreporter.stats.values():
        for rep in reports:
            props = dict(getattr(rep, "user_properties", ()) or ())
            if getattr(rep, "when", None) == "call" and "posctl_rows" in props:
                rows.append(props["posctl_rows"])
    if rows:
        terminalreporter.write_sep("=", "positive controls: control → certify runs → verdict")
        for row in sorted(rows):
            terminalreporter.write_line(row)
