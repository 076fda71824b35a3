"""Catalogue rows of the limits cases (tests: conformance/cases/test_limits.py)."""

from __future__ import annotations

from ..case_row import Case

F = "limits and bad input"

ROWS: tuple[Case, ...] = (
    Case("LIM-001", "MUST", "The runner MUST refuse, with a plain error, a 65th channel while 64 "
         "are open, and open no Hermes socket for it.", "3.2", F),
    Case("LIM-002", "MUST", "The runner MUST refuse, with a plain error, a 65th lease while 64 are "
         "open.", "3.5", F),
    Case("LIM-003", "MUST", "A Hermes body over 8 MiB MUST be answered with an error result, not "
         "relayed, and the runner stays online.", "3.1", F),
    Case("LIM-004", "MUST", "The runner MUST answer a kind it does not know with "
         "runner_command_unknown and cause no effect.", "3", F),
    Case("LIM-005", "MUST", "A payload missing required fields MUST get an error result, and the "
         "runner keeps running on the same connection.", "3", F),
    Case("LIM-006", "MUST", "A gateway.open whose connectionId is not a string MUST get an error "
         "result and open no Hermes socket.", "3.2", F),
    Case("LIM-007", "MUST", "An RPC on a channel that is not open MUST be refused without "
         "reaching Hermes.", "3.3", F),
    Case("LIM-008", "MUST", "A Hermes JSON-RPC error MUST come back as an error result, and the "
         "channel stays usable.", "3.3", F),
    Case("LIM-009", "MUST", "When Hermes is unreachable the runner MUST answer with an error "
         "result, and a Hermes failure MUST NOT disconnect it from the control plane.", "3.1", F),
    Case("LIM-010", "MUST", "An extension kind (network.configure) on a runner that does not "
         "advertise it MUST get an error result (runner_command_unknown or "
         "runner_feature_unavailable) and cause no effect.", "3", F),
    Case("LIM-011", "MUST", "A command near the 36 MiB single-command limit MUST be handled: one "
         "result is posted and the runner stays online.", "5", F),
    # 9NN: sentences of docs/protocol.md that no case tested until the spec-coverage sweep
    # (each tagged with its case there; docs/spec-coverage-gaps.txt lists those still open).
    Case("LIM-901", "MUST", "A core runner MUST refuse memory-extract with 409 "
         "memory_extraction_unavailable, without a Hermes effect.", "3.1 http", F),
    Case("LIM-902", "MUST", "gateway.open MUST accept any lower-case UUID as connectionId, and "
         "MUST refuse one that is already open with a plain error (runner_error), opening no "
         "second Hermes socket.", "3.2 gateway.open", F),
    Case("LIM-903", "SHOULD", "An RPC on a channel that is not open SHOULD be refused with "
         "runner_connection_closed.", "3.3", F),
    Case("LIM-905", "SHOULD", "The runner SHOULD read at most 40 MiB of a response: a poll "
         "answer over 40 MiB is a failed poll, and the command in it is not acted on.",
         "2.1 Transport", F),
)
