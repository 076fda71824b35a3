"""Catalogue rows of the cancel cases (tests: conformance/cases/test_cancel.py)."""

from __future__ import annotations

from ..case_row import Case

ROWS: tuple[Case, ...] = ()
