"""Catalogue rows of spec-coverage cases that need an opt-in scripted-Hermes behaviour
(``fixtures.hermes.script.BEHAVIOURS``; tests: conformance/cases/test_spec_extra_scripted.py)."""

from __future__ import annotations

from ..case_row import Case

ROWS: tuple[Case, ...] = (
    Case("WIR-906", "SHOULD", "An error result's message SHOULD be at most 1000 chars: a Hermes "
         "JSON-RPC error with a 5000-char message comes back as an error result whose message "
         "holds at most 1000.", "2.6.3", "wire basics"),
    Case("PERM-903", "SHOULD", "When Hermes' session.active_list reply has no session list, the "
         "runner SHOULD answer 502 session_stop_unconfirmed (not an empty list).", "3.3",
         "permission intersection"),
)
