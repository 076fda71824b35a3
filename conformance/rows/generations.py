"""Catalogue rows of the generation cases (tests: conformance/cases/test_generations.py)."""

from __future__ import annotations

from ..case_row import Case

F = "generations"
S = "2.4 Epochs (generations)"

ROWS: tuple[Case, ...] = (
    Case("GEN-001", "MUST", "After a new epoch the runner's channels MUST be gone: their Hermes "
         "sockets close.", S, F),
    Case("GEN-002", "MUST", "After a new epoch the runner's leases MUST be gone: the listener no "
         "longer serves the old token.", S, F, feature="team-tools"),
    Case("GEN-003", "MUST", "After a control-plane restart the runner MUST poll with "
         "x-runner-reset: 1, and new commands MUST work.", S, F),
    Case("GEN-004", "MUST", "After a watchdog expiry (server clock +35 s) the runner MUST "
         "reconnect and use the new epoch.", "2.5 Watchdog", F),
    Case("GEN-005", "MUST", "After any epoch change every non-poll request MUST carry the new "
         "epoch (no stale epoch header).", "2.2 Request headers", F),
    Case("GEN-006", "MUST", "A replaced process MUST be fenced: its channel is disconnected, its "
         "requests get 409 and it does not exit on them; after a disable commands end "
         "runner_offline.", S, F, upstream="runner.test.ts#16"),
    Case("GEN-007", "MUST", "After a transport failure the epoch MUST reset, the obsolete gateways "
         "close once, and new channels work.", S, F, upstream="runner.test.ts#17"),
    Case("GEN-008", "MUST", "An admin disable MUST make the runner exit 1 (runner_unauthorized) "
         "without retrying.", "1.5 Signals, exit codes, output", F),
    Case("GEN-009", "MUST", "A gateway.rpc for a channel of an old epoch MUST be refused, with no "
         "effect on the old session.", "2.8 The runner's loop", F),
    # 9NN: sentences of docs/protocol.md that no case tested until the spec-coverage sweep
    # (each tagged with its case there; docs/spec-coverage-gaps.txt lists those still open).
    Case("GEN-901", "SHOULD", "A local disconnect SHOULD send session.interrupt to the running "
         "sessions of the channels it closes.", "2.4", F),
    Case("GEN-902", "MUST", "A local disconnect MUST tombstone the ids of the channels it "
         "closes: a gateway.open of such an id right after fails.", "2.4", F),
)
