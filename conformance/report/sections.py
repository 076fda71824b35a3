"""The order of ``report.html``: which statuses come first, under which heading, and which
are collapsed per family.

Rules:
- :data:`STATUS_TABLE` is the one table keyed by status: its rank (lower first), its heading and
  whether its cases are folded into one ``<details>`` per family. Failures first, then errors
  and time-outs, then expected failures and stale baseline entries, then passes collapsed per
  family, then the not-applicable ones, likewise collapsed.
- A status not in the table (one a newer plugin writes) is still shown: after the listed
  problems and before the passes, under its own name, not collapsed.
- Within a section cases are in ID order; the family table's columns follow the same order
  (the statuses of the table, then any other status a case has).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ..results import CaseResult


@dataclass(frozen=True)
class Status:
    rank: int
    heading: str
    collapsed: bool = False  # folded into one ``<details>`` per family
    open: bool = False  # each case's ``<details>`` open on load


STATUS_TABLE: dict[str, Status] = {
    "fail": Status(0, "Failures", open=True),
    "error": Status(1, "Errors", open=True),
    "timeout": Status(1, "Timeouts", open=True),
    "expected-fail": Status(2, "Expected failures (baselined)"),
    "stale": Status(2, "Stale baseline entries (passing now: remove them from the baseline)",
                    open=True),
    "not-run": Status(3, "Not run (a program they need is not installed)", open=True),
    "pass": Status(8, "Passes", collapsed=True),
    "not-applicable": Status(9, "Not applicable", collapsed=True),
}
UNKNOWN_RANK = 5  # after the listed problems, before the passes


def status_of(name: str) -> Status:
    return STATUS_TABLE.get(name) or Status(UNKNOWN_RANK, name, open=True)


@dataclass
class Section:
    status: str
    heading: str
    collapsed: bool
    open: bool
    cases: list[CaseResult] = field(default_factory=list)

    def by_family(self) -> list[tuple[str, list[CaseResult]]]:
        groups: dict[str, list[CaseResult]] = {}
        for c in self.cases:
            groups.setdefault(c.family, []).append(c)
        return sorted(groups.items())


def sections(cases: Iterable[CaseResult]) -> list[Section]:
    """One section per status present, in rank order (then by status name)."""
    found: dict[str, Section] = {}
    for c in sorted(cases, key=lambda c: c.id):
        s = status_of(c.status)
        found.setdefault(c.status, Section(c.status, s.heading, s.collapsed, s.open)).cases.append(c)
    return sorted(found.values(), key=lambda sec: (status_of(sec.status).rank, sec.status))


def columns(cases: Iterable[CaseResult]) -> list[str]:
    """The family table's status columns: the table's core statuses, then the others present."""
    present = {c.status for c in cases}
    core = ["pass", "fail", "expected-fail", "stale", "not-applicable"]
    return sorted(set(core) | present, key=lambda s: (status_of(s).rank, s))


def family_rows(cases: list[CaseResult]) -> list[dict[str, Any]]:
    cols = columns(cases)
    rows: dict[str, dict[str, int]] = {}
    for c in cases:
        rows.setdefault(c.family, dict.fromkeys(cols, 0))[c.status] += 1
    return [{"family": f, "counts": counts} for f, counts in sorted(rows.items())]
