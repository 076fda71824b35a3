"""Catalogue rows of the limits cases (tests: conformance/cases/test_limits.py)."""

from __future__ import annotations

from ..case_row import Case

ROWS: tuple[Case, ...] = ()
