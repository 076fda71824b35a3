"""Catalogue rows of the secrets cases (tests: conformance/cases/test_secrets.py)."""

from __future__ import annotations

from ..case_row import Case

ROWS: tuple[Case, ...] = ()
