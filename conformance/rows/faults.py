"""Catalogue rows of the fault matrix (tests: conformance/cases/test_fault_matrix.py).

Each row is one line of :data:`conformance.faults_matrix.CELLS`, run cell by cell (enumerated,
not sampled; the cells of a long row on several rigs at once, ``faults_matrix.LANES``); a row
passes when all its cells do. Every cell is judged by every invariant of
:mod:`conformance.checks.invariants` over its facts; :data:`JUDGED_BY` names those that carry
the row's promise (FLT-004's is the cell's own check: nothing accepted after the deadline).
"""

from __future__ import annotations

from ..case_row import Case

F = "fault matrix"

ROWS: tuple[Case, ...] = (
    Case("FLT-001", "MUST", "A kill -9 at each step of a command's life (after delivery, after "
         "the started row, after admit, during the Hermes call, after Hermes replied, before and "
         "after the result post), for http, a gateway prompt and lease.create, MUST give no "
         "double execution and no lost receipt.", "4.2", F),
    Case("FLT-002", "MUST", "A server restart at each step of a command's life MUST give no stale "
         "result accepted and no double execution.", "2.4", F),
    Case("FLT-003", "MUST", "A dropped, a 5xx and a slow answer on poll, admit and result MUST be "
         "followed by a reconnection with a reset poll after a poll error, with nothing lost.",
         "2.8", F),
    Case("FLT-004", "MUST", "A command whose deadline expires (server clock) while queued, held at "
         "admit or held at its result MUST NOT be accepted after its deadline.", "2.7", F),
    Case("FLT-005", "MUST", "A completed receipt retired after one hour (runner restarted under "
         "faketime at the server clock's offset) MUST be answered runner_command_uncertain and "
         "never run again.", "4.4", F, needs=("faketime",)),
)

#: case id → matrix row name
ROW_OF: dict[str, str] = {"FLT-001": "kill", "FLT-002": "server", "FLT-003": "route",
                          "FLT-004": "deadline", "FLT-005": "retire"}

#: case id → the invariants that carry the row's promise (every invariant judges every cell)
JUDGED_BY: dict[str, tuple[str, ...]] = {
    "FLT-001": ("INV-1", "INV-6", "INV-7"),   # no double execution, no lost receipt, no rerun
    "FLT-002": ("INV-1", "INV-5", "INV-11"),  # no double execution, no stale result accepted
    "FLT-003": ("INV-1", "INV-6"),            # reconnected with nothing lost
    "FLT-004": (),                            # the cell's check: not accepted after its deadline
    "FLT-005": ("INV-7",),                    # a retired receipt: uncertain, never run again
}
