"""Catalogue rows of the config process cases (tests: conformance/cases/test_config_process.py)."""

from __future__ import annotations

from ..case_row import Case

ROWS: tuple[Case, ...] = ()
