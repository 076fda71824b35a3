"""tests/negative_controls: the probe modules are importable (pytest runs in importlib mode),
and the self-test's verdicts are printed as one table at the end of the session."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)


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
