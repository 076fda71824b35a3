"""Catalogue rows of the properties cases (tests: conformance/cases/test_properties.py)."""

from __future__ import annotations

from ..case_row import Case

ROWS: tuple[Case, ...] = ()
