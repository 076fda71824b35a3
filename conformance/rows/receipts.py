"""Catalogue rows of the incomplete-receipt cases (tests: conformance/cases/test_receipts.py)."""

from __future__ import annotations

from ..case_row import Case

F = "incomplete receipts"
S = "4.3 Handling a delivered command (in this order)"

ROWS: tuple[Case, ...] = (
    Case("INC-001", "MUST", "After a kill -9 while an http command is inside Hermes, its "
         "redelivery after the restart MUST be answered runner_command_uncertain and MUST NOT be "
         "executed again.", S, F),
    Case("INC-002", "MUST", "After a kill -9 while the admit answer is held, the redelivery after "
         "the restart MUST be answered runner_command_uncertain, with no effect.", S, F),
    Case("INC-003", "MUST", "After a kill -9 during a gateway prompt.submit, the redelivery after "
         "the restart MUST be answered runner_command_uncertain, with one prompt effect at most.",
         S, F),
    Case("INC-004", "MUST", "After a kill -9 while the result post is held (Hermes replied, the "
         "reply stored), the redelivery after the restart MUST get the same result, with no new "
         "effect.", "4.1 Schema", F),
    Case("INC-005", "MUST", "A complete row older than 1 h (restart under faketime +3600 s) MUST "
         "be retired: its redelivery is answered runner_command_uncertain, never run.",
         "4.4 Compaction", F, needs=("faketime",)),
    Case("INC-006", "MUST", "Every reply, refusals included, MUST be stored before its result is "
         "posted: after a kill -9 while the result of a refusal is held, the redelivery gets the "
         "same refusal.", S, F),
    # 9NN: sentences of docs/protocol.md that no case tested until the spec-coverage sweep
    # (each tagged with its case there; docs/spec-coverage-gaps.txt lists those still open).
    Case("INC-901", "MUST", "When the runner cannot claim a command in its ledger (the harness "
         "holds the ledger's write lock), it MUST NOT execute the command.", "4.3",
         F),
    Case("INC-902", "SHOULD", "A command the runner cannot claim in its ledger SHOULD be "
         "answered runner_command_uncertain.", "2.8", F),
)
