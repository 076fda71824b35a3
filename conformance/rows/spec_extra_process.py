"""Catalogue rows of spec-coverage cases for the process and the poll loop (protocol 1 §1.4,
§1.5, §2.2, §2.5; tests: conformance/cases/test_spec_extra_process.py). IDs 900–999."""

from __future__ import annotations

from ..case_row import Case

_CFG = "config and process"
_WIR = "wire basics"
_REC = "reconnection"

ROWS: tuple[Case, ...] = (
    Case("CFG-903", "SHOULD", "The runner SHOULD create every file in its state directory with "
         "mode 0600 (the ledger and its journal files included).", "1.4", _CFG),
    Case("CFG-904", "MUST", "On the first SIGINT the runner MUST stop polling: no poll request "
         "reaches the control plane after the signal.", "1.5", _CFG),
    Case("CFG-905", "MUST", "During a graceful stop the runner MUST NOT start executing a "
         "command it had not started: a command whose admit is granted after the SIGTERM causes "
         "no Hermes effect.", "1.5", _CFG),
    Case("CFG-906", "SHOULD", "Each status line on stderr SHOULD have the form "
         "'<ISO-8601 time> <text>'.", "1.5", _CFG),
    Case("WIR-901", "MUST", "A poll made while the runner is connected MUST NOT carry "
         "x-runner-reset.", "2.2 Request headers", _WIR),
    Case("WIR-902", "SHOULD", "The runner SHOULD send x-runner-features on every request (poll, "
         "admit, result, event), not only once.", "2.2 Request headers", _WIR),
    Case("REC-901", "MUST", "While connected, the runner MUST start the next poll within a few "
         "seconds of the previous answer.", "2.5 Watchdog", _REC),
)
