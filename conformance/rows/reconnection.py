"""Catalogue rows of the reconnection cases (tests: conformance/cases/test_reconnection.py)."""

from __future__ import annotations

from ..case_row import Case

F = "reconnection"
S = "2.8 The runner's loop"

ROWS: tuple[Case, ...] = (
    Case("REC-001", "MUST", "After a 5xx poll answer the next poll MUST carry x-runner-reset: 1.",
         S, F),
    Case("REC-002", "MUST", "After a dropped poll connection the runner MUST send a reset poll and "
         "MUST NOT exit.", S, F),
    Case("REC-003", "MUST", "A slow (delayed) poll answer MUST NOT make the runner exit, and "
         "commands after it MUST work.", S, F),
    Case("REC-004", "MUST", "A result post answered 5xx or dropped MUST lose no receipt: the "
         "redelivered command gets the same result from the ledger, with no new effect.",
         "2.6.3 result — `POST` → `{ok: true}`", F),
    Case("REC-005", "MUST", "A command whose admit was answered 5xx or dropped MUST NOT be "
         "executed.", "2.6.2 admit — `POST {id}` → `{allowed: boolean}`", F),
    Case("REC-006", "MUST", "A 409 on a route MUST NOT end the runner: a poll answered 409 "
         "runner_instance_changed MUST be followed by a reset poll, and the command whose admit "
         "met the lost state MUST NOT run.", S, F),
    Case("REC-007", "MUST", "A 409 runner_epoch_changed on result MUST lead to a reset poll, and "
         "the redelivered command MUST be answered from the ledger.", S, F),
    Case("REC-008", "MUST", "A poll answer that is not a poll body MUST make the runner reconnect, "
         "not crash.", S, F),
    Case("REC-009", "SHOULD", "After a failure the runner SHOULD wait about 1 s before the reset "
         "poll (no hot loop).", S, F),
    Case("REC-010", "MUST", "A 503 service_updating / service_stopping MUST make the runner "
         "reconnect later, with nothing lost.", S, F),
    # 9NN: sentences of docs/protocol.md that no case tested until the spec-coverage sweep
    # (each tagged with its case there; docs/spec-coverage-gaps.txt lists those still open).
    Case("REC-901", "MUST", "While connected, the runner MUST start the next poll within a few "
         "seconds of the previous answer.", "2.5 Watchdog", F),
    Case("REC-902", "MUST", "A failed event post other than 410 MUST lead to a local "
         "disconnect: the channel's Hermes socket closes and the next poll carries "
         "x-runner-reset: 1.", "2.6.4", F),
)
