"""Catalogue rows of the cancel cases (tests: conformance/cases/test_cancel_channels.py,
_leases.py and _admits.py)."""

from __future__ import annotations

from ..case_row import Case

F = "cancel races"

ROWS: tuple[Case, ...] = (
    Case("CAN-001", "MUST", "A gateway.close that overtakes a pending gateway.open (Hermes "
         "handshake held) MUST leave no channel behind.", "3.4", F, upstream="runner.test.ts#15"),
    Case("CAN-002", "MUST", "A slow RPC on the channel MUST NOT delay the gateway.close: the close "
         "is answered while the RPC is held in Hermes.", "3.4", F),
    Case("CAN-003", "MUST", "gateway.close MUST send session.interrupt to each running session of "
         "the channel before it closes the socket.", "3.4", F),
    Case("CAN-004", "MUST", "A gateway.open of a connectionId closed within the last 60 s MUST "
         "fail and open no Hermes socket.", "3.2", F),
    Case("CAN-005", "MUST", "A lease.close that overtakes a lease.create MUST leave no lease and "
         "no bind behind.", "3.5", F, upstream="runner.test.ts#20"),
    Case("CAN-006", "MUST", "lease.close MUST unbind the lease in the plugin and close its "
         "listener: the old bridge token is no longer served.", "3.7", F),
    Case("CAN-007", "MUST", "A lease.create of a leaseId closed within the last 60 s MUST fail "
         "with a plain error.", "3.5", F),
    Case("CAN-008", "MUST", "A session.interrupt sent as gateway.rpc MUST reach Hermes and stop "
         "the running turn.", "3.3", F),
    Case("CAN-009", "MUST", "A command whose account permission changes while its admit is "
         "pending MUST NOT be executed (runner_command_not_admitted, no prompt reaches Hermes).",
         "2.6", F, upstream="runner.test.ts#19"),
    Case("CAN-010", "MUST", "A command still queued when the account authorization changes MUST "
         "NOT be executed (runner_command_not_admitted, Hermes never receives the prompt).",
         "2.6", F, upstream="runner.test.ts#13"),
    Case("CAN-011", "SHOULD", "A gateway.close after a failed gateway.open SHOULD answer without "
         "error, and nothing of the failed open is left (no Hermes socket).", "3.4", F),
    # 9NN: sentences of docs/protocol.md that no case tested until the spec-coverage sweep
    # (each tagged with its case there; docs/spec-coverage-gaps.txt lists those still open).
    Case("CAN-901", "MUST", "gateway.close MUST finish within about 3 s however long the "
         "interrupts take: it is answered while Hermes still holds the session.interrupt.",
         "3.4", F),
    Case("CAN-902", "SHOULD", "If the channel closes while a session.create is in flight, the "
         "runner SHOULD answer it runner_command_uncertain.", "3.3", F),
    Case("CAN-903", "MUST", "If the channel closes after a request other than create/resume "
         "was sent and before its reply, the runner MUST NOT resend it: a prompt.submit held in "
         "Hermes at gateway.close reaches Hermes once.", "3.3", F),
)
