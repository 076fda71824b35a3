"""Catalogue rows of the faults cases (tests: conformance/cases/test_faults.py)."""

from __future__ import annotations

from ..case_row import Case

ROWS: tuple[Case, ...] = ()
