"""Catalogue rows of the dedupe cases (tests: conformance/cases/test_dedupe.py)."""

from __future__ import annotations

from ..case_row import Case

ROWS: tuple[Case, ...] = ()
