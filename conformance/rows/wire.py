"""Catalogue rows of the wire cases (tests: conformance/cases/test_wire_requests.py,
_commands.py and _client.py)."""

from __future__ import annotations

from ..case_row import Case

_F = "wire basics"

ROWS: tuple[Case, ...] = (
    Case("WIR-001", "MUST", "The first poll of a process MUST carry x-runner-reset: 1.",
         "2.2 Request headers", _F),
    Case("WIR-002", "MUST", "Every request MUST carry Authorization: Bearer <token>, "
         "x-runner-protocol: 1 and a lower-case UUID x-runner-instance.",
         "2.2 Request headers", _F),
    Case("WIR-003", "MUST", "A request MUST NOT carry an Origin header.",
         "2.2 Request headers", _F),
    Case("WIR-004", "MUST", "Every non-poll request MUST carry the epoch of the poll answer that "
         "delivered what it concerns.", "2.2 Request headers", _F),
    Case("WIR-005", "MUST", "The instance id MUST be the same on every request of one process "
         "and new after a restart.", "2.2 Request headers", _F),
    Case("WIR-006", "MUST", "No Hermes effect of a command MUST happen before the control plane "
         "granted its admit (admit.seq_out < effect.seq).", "2.6.2 admit", _F),
    Case("WIR-007", "MUST", "A command whose admit answered {allowed:false} MUST cause no effect "
         "and MUST be answered runner_command_not_admitted.", "2.6.2 admit", _F),
    Case("WIR-008", "MUST", "Every delivered command MUST get exactly one result post with its id.",
         "2.6.3 result", _F),
    Case("WIR-009", "MUST", "Commands MUST run concurrently: a command held at a Hermes pause "
         "point MUST NOT delay a second one.", "2.8 The runner's loop", _F),
    Case("WIR-010", "MUST", "A command whose expiresAt has passed at delivery MUST NOT be "
         "admitted nor executed (runner_command_not_admitted).",
         "4.3 Handling a delivered command", _F),
    Case("WIR-011", "MUST", "Every command of a batch of several in one poll answer MUST be "
         "answered.", "2.6.1 poll", _F),
    Case("WIR-012", "SHOULD", "The runner SHOULD advertise only feature names of the protocol in "
         "x-runner-features.", "2.2 Request headers", _F),
    Case("WIR-013", "MUST", "The runner MUST connect through outbound transport, filter profiles "
         "and forward only owned session events.", "3.2 gateway.open", _F,
         upstream="runner.test.ts#10"),
    # 9NN: sentences of docs/protocol.md that no case tested until the spec-coverage sweep
    # (each tagged with its case there; docs/spec-coverage-gaps.txt lists those still open).
    Case("WIR-901", "MUST", "A poll made while the runner is connected MUST NOT carry "
         "x-runner-reset.", "2.2 Request headers", _F),
    Case("WIR-902", "SHOULD", "The runner SHOULD send x-runner-features on every request (poll, "
         "admit, result, event), not only once.", "2.2 Request headers", _F),
    Case("WIR-906", "SHOULD", "An error result's message SHOULD be at most 1000 chars: a Hermes "
         "JSON-RPC error with a 5000-char message comes back as an error result whose message "
         "holds at most 1000.", "2.6.3", _F),
    Case("WIR-903", "MUST", "The runner MUST NOT follow redirects: a poll answered 307 is a "
         "failed request (a reset poll follows) and the Location is never requested.",
         "2.1 Transport", _F),
    Case("WIR-904", "MUST", "The runner MUST act on the code of an error, not on its text or "
         "status: a 403 whose code is runner_instance_changed and whose text says "
         "runner_unauthorized leads to a reconnect, not an exit.", "2.1 Transport", _F),
    Case("WIR-905", "MUST", "A command whose expiresAt is missing or not a number MUST NOT be "
         "executed, even when its admit would be granted.", "4.3", _F),
    Case("WIR-907", "SHOULD", "The runner SHOULD open each gateway WebSocket on a connection "
         "of its own, never by upgrading a kept-alive connection that carried an HTTP request "
         "(Hermes 0.19.0's server may cut such a WebSocket 5 s after it opened).", "8.2", _F),
)
