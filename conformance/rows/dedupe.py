"""Catalogue rows of the dedupe cases (tests: conformance/cases/test_dedupe.py)."""

from __future__ import annotations

from ..case_row import Case

F = "dedupe"
S = "4.3 Handling a delivered command (in this order)"

ROWS: tuple[Case, ...] = (
    Case("DED-001", "MUST", "A command delivered twice in one batch MUST run once, and every "
         "result posted for it MUST carry the same reply.", S, F),
    Case("DED-002", "MUST", "A replay of a completed id with the same payload MUST get the stored "
         "reply without a Hermes call.", S, F),
    Case("DED-003", "MUST", "The same id with another payload MUST be answered "
         "idempotency_conflict, with no Hermes effect.", S, F),
    Case("DED-004", "MUST", "After a restart (SIGTERM, start) a replay MUST be answered from the "
         "ledger: a completed id gets its stored reply, a conflicting payload idempotency_conflict, "
         "a started row runner_command_uncertain.", "4.1 Schema", F,
         upstream="runner.test.ts#14"),
    Case("DED-005", "MUST", "A redelivery while the command is in flight (held inside Hermes, "
         "server clock past the redelivery time) MUST NOT run it a second time.", S, F),
    Case("DED-006", "MUST", "A replayed gateway.rpc prompt.submit MUST reach Hermes once.", S, F),
    Case("DED-007", "MUST", "A replayed lease.create MUST create one lease: the replay gets the "
         "stored reply and no second bind.", S, F, feature="team-tools"),
    Case("DED-008", "MUST", "A stored refusal MUST be replayed as the same refusal, without a new "
         "admit and without an effect.", S, F),
    # 9NN: sentences of docs/protocol.md that no case tested until the spec-coverage sweep
    # (each tagged with its case there; docs/spec-coverage-gaps.txt lists those still open).
    Case("DED-901", "MUST", "A delivery of an in-flight id with another payload MUST be answered "
         "idempotency_conflict at once, while the original is still running.", "4.3", F),
    Case("DED-902", "MUST", "A complete row younger than one hour MUST keep its stored reply "
         "however many commands came after it: a replay after 300 later commands (a compaction "
         "at the 256th among them) gets the stored reply without a Hermes call.",
         "4.4 Compaction", F),
)
