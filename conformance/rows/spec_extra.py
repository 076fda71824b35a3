"""Catalogue rows of the cases that cover sentences of docs/protocol.md no family case tests
(tests: conformance/cases/test_spec_extra.py). IDs 900–999 of each family prefix."""

from __future__ import annotations

from ..case_row import Case

ROWS: tuple[Case, ...] = (
    Case("CFG-902", "MUST", "Without --config the runner MUST exit with code 1.", "1.5",
         "config and process"),
)
