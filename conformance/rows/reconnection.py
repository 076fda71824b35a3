"""Catalogue rows of the reconnection cases (tests: conformance/cases/test_reconnection.py)."""

from __future__ import annotations

from ..case_row import Case

ROWS: tuple[Case, ...] = ()
