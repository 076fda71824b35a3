"""The case catalogue: every conformance case as one row of data.

Rules of this module:
- A case is a row: a stable ID (``GEN-003``: family prefix, dash, three digits), its level
  (MUST / SHOULD / MAY), the requirement sentence, the ``docs/protocol.md`` section, the family,
  the feature it needs (``core``, ``team-tools``, ``artifact-chunks-v1`` …) and, when it pins one,
  the upstream test it comes from (``runner.test.ts#14``).
- The rows below are what actually runs: the pytest plugin binds every ``@case("ID")`` test to
  its row, a test checks both ways (every row has a test, every case test a row), and
  ``docs/conformance-cases.md`` is generated from these rows (``python -m conformance cases
  --write``), so the docs never drift.
- A case whose feature the runner does not advertise is *not-applicable*, never failed; a
  certification profile (``core``, ``team-tools``, ``all``) selects the features that count.
- This module is pure data and checks: no pytest, no I/O.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Iterator

from .case_row import LEVELS, Case
from .programs import PROGRAMS
from .rows import ALL_ROWS

#: family prefix -> family name (the ten families of the design brief; property families later).
FAMILIES: dict[str, str] = {
    "PERM": "permission intersection",
    "DED": "dedupe",
    "INC": "incomplete receipts",
    "GEN": "generations",
    "REC": "reconnection",
    "CAN": "cancel races",
    "ISO": "session isolation",
    "CFG": "config and process",
    "LIM": "limits and bad input",
    "TT": "team tools",
    "WIR": "wire basics",
    "SEC": "secrets",
    "PROP": "property machines",
    "FLT": "fault matrix",
    "HRM": "Hermes interop",
}

#: feature -> what advertising it means. ``core`` is always applicable.
FEATURES: dict[str, str] = {
    "core": "protocol 1 core: config, machine API, http, gateway, ledger, limits",
    "team-tools": "leases, the loopback tool listener, bind/unbind and the tool relay",
    "artifact-chunks-v1": "chunked artifact upload from a channel",
    "file-transfer-v1": "file transfer checks on a channel",
}

#: Features a runner claims by being certified under a profile that names them; every other
#: feature is a wire feature (``x-runner-features``) and is checked against what the runner sends.
PROFILE_FEATURES = frozenset({"core", "team-tools"})

#: profile -> the features whose cases it certifies.
PROFILES: dict[str, frozenset[str]] = {
    "core": frozenset({"core"}),
    "team-tools": frozenset({"core", "team-tools"}),
    "all": frozenset(FEATURES),
}

ID_RE = re.compile(r"^(?P<prefix>[A-Z]{2,5})-(?P<num>\d{3})$")
UPSTREAM_RE = re.compile(r"^[\w.-]+\.ts#\d+$")


class CatalogueError(ValueError):
    """A row breaks a rule of the catalogue (message names the row and the rule)."""


def _row_problems(row: Case, families: dict[str, str], features: dict[str, str]) -> Iterator[str]:
    m = ID_RE.match(row.id)
    if not m:
        yield "id must look like GEN-003"
    elif m["prefix"] not in families:
        yield f"unknown family prefix {m['prefix']}"
    elif families[m["prefix"]] != row.family:
        yield f"family {row.family!r} does not match prefix {m['prefix']} ({families[m['prefix']]!r})"
    if row.level not in LEVELS:
        yield f"level must be one of {', '.join(LEVELS)}"
    elif row.level not in row.requirement:
        yield f"requirement sentence must state its level ({row.level})"
    if row.feature not in features:
        yield f"unknown feature {row.feature!r}"
    if not row.section.strip():
        yield "section is empty"
    if row.upstream is not None and not UPSTREAM_RE.match(row.upstream):
        yield "upstream anchor must look like runner.test.ts#14"
    for name in row.needs:
        if name not in PROGRAMS:
            yield f"needs {name!r}, which conformance/environment.py's PROGRAMS does not list"


class Catalogue:
    """An ordered, validated set of case rows, looked up by ID."""

    def __init__(
        self,
        rows: Iterable[Case],
        *,
        families: dict[str, str] | None = None,
        features: dict[str, str] | None = None,
    ) -> None:
        self.families = dict(FAMILIES if families is None else families)
        self.features = dict(FEATURES if features is None else features)
        self.rows: tuple[Case, ...] = tuple(rows)
        self._by_id: dict[str, Case] = {}
        for row in self.rows:
            problems = list(_row_problems(row, self.families, self.features))
            if problems:
                raise CatalogueError(f"{row.id}: {'; '.join(problems)}")
            if row.id in self._by_id:
                raise CatalogueError(f"{row.id}: duplicate case id")
            self._by_id[row.id] = row

    def __iter__(self) -> Iterator[Case]:
        return iter(self.rows)

    def __len__(self) -> int:
        return len(self.rows)

    def __contains__(self, case_id: object) -> bool:
        return case_id in self._by_id

    def get(self, case_id: str) -> Case | None:
        return self._by_id.get(case_id)

    def __getitem__(self, case_id: str) -> Case:
        return self._by_id[case_id]

    def ids(self) -> list[str]:
        return [row.id for row in self.rows]

    def in_profile(self, profile: str) -> list[Case]:
        features = PROFILES[profile]
        return [row for row in self.rows if row.feature in features]

    def selection(self, profile: str, patterns: list[str]) -> list[Case]:
        """The rows a run of ``profile`` with ``--cases`` ``patterns`` selects."""
        return [row for row in self.in_profile(profile) if matches(row.id, patterns)]


def case_patterns(text: str | None) -> list[str]:
    """``--cases "GEN-*,DED-002"`` as its patterns ([]: every case)."""
    return [p.strip() for p in (text or "").split(",") if p.strip()]


def matches(case_id: str, patterns: list[str]) -> bool:
    """Whether ``case_id`` is selected by ``patterns`` (shell-style; [] selects every case)."""
    return not patterns or any(fnmatch.fnmatchcase(case_id, p) for p in patterns)


# The rows live in conformance/rows/<family>.py, beside their tests in conformance/cases/.
ROWS: tuple[Case, ...] = ALL_ROWS

CATALOGUE = Catalogue(ROWS)
