"""Catalogue rows of the isolation cases (tests: conformance/cases/test_isolation.py)."""

from __future__ import annotations

from ..case_row import Case

ROWS: tuple[Case, ...] = ()
