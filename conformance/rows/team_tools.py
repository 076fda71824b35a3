"""Catalogue rows of the team tools cases (tests: conformance/cases/test_team_tools.py)."""

from __future__ import annotations

from ..case_row import Case

ROWS: tuple[Case, ...] = ()
