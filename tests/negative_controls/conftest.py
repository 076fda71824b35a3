"""tests/negative_controls: the self-test's verdicts are printed as one table at the end of the
session. (The probe modules are imported through the package, ``tests.negative_controls``.)"""
from __future__ import annotations

from typing import Any


def pytest_terminal_summary(terminalreporter: Any) -> None:
    rows = []
    for reports in terminalreporter.stats.values():
        for rep in reports:
            props = dict(getattr(rep, "user_properties", ()) or ())
            if getattr(rep, "when", None) == "call" and "negctl_row" in props:
                rows.append(props["negctl_row"])
    if rows:
        terminalreporter.write_sep("=", "negative controls: control → catching cases → verdict")
        for row in sorted(rows):
            terminalreporter.write_line(row)
