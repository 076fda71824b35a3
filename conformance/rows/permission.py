"""Catalogue rows of the permission cases (tests: conformance/cases/test_permission.py)."""

from __future__ import annotations

from ..case_row import Case

ROWS: tuple[Case, ...] = ()
