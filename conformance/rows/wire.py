"""Catalogue rows of the wire cases (tests: conformance/cases/test_wire.py)."""

from __future__ import annotations

from ..case_row import Case

ROWS: tuple[Case, ...] = ()
