"""Catalogue rows of spec-coverage cases for a ledger the runner cannot use and for the local
disconnect (protocol 1 §2.4, §2.8, §4.3; tests: conformance/cases/test_spec_extra_state.py).
IDs 900–999."""

from __future__ import annotations

from ..case_row import Case

ROWS: tuple[Case, ...] = (
    Case("INC-901", "MUST", "When the runner cannot claim a command in its ledger (the harness "
         "holds the ledger's write lock), it MUST NOT execute the command.", "4.3",
         "incomplete receipts"),
    Case("INC-902", "SHOULD", "A command the runner cannot claim in its ledger SHOULD be "
         "answered runner_command_uncertain.", "2.8", "incomplete receipts"),
    Case("GEN-901", "SHOULD", "A local disconnect SHOULD send session.interrupt to the running "
         "sessions of the channels it closes.", "2.4", "generations"),
    Case("GEN-902", "MUST", "A local disconnect MUST tombstone the ids of the channels it "
         "closes: a gateway.open of such an id right after fails.", "2.4", "generations"),
)
