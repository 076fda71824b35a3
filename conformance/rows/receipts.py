"""Catalogue rows of the receipts cases (tests: conformance/cases/test_receipts.py)."""

from __future__ import annotations

from ..case_row import Case

ROWS: tuple[Case, ...] = ()
