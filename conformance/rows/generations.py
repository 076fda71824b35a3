"""Catalogue rows of the generations cases (tests: conformance/cases/test_generations.py)."""

from __future__ import annotations

from ..case_row import Case

ROWS: tuple[Case, ...] = ()
