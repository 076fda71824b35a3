"""Catalogue rows of the secrets cases (tests: conformance/cases/test_secrets_output.py and
_hermes_auth.py)."""

from __future__ import annotations

from ..case_row import Case

_F = "secrets"

ROWS: tuple[Case, ...] = (
    Case("SEC-001", "MUST", "No byte of the runner's stdout/stderr MUST hold the runner token or "
         "the Hermes password or session over a full run with errors.",
         "1.5 Signals, exit codes, output", _F),
    Case("SEC-002", "MUST", "A refused config MUST never echo the token or the password.",
         "1.2 Validation order", _F),
    Case("SEC-003", "MUST", "The Hermes password (account mode), its session cookie and ws "
         "tickets MUST never reach the control plane.", "8.1 Authentication", _F),
    Case("SEC-004", "MUST", "The Hermes session token MUST never reach the control plane "
         "(relayed headers included).", "8.1 Authentication", _F),
    Case("SEC-005", "MUST", "The lease (bridge) token MUST never reach the control plane.",
         "6.4 Bind and unbind", _F, feature="team-tools"),
    Case("SEC-006", "MUST", "In account mode with hermesCredentials the runner MUST log in (login "
         "route, cookie, ticket) and relay.", "8.1 Authentication", _F),
    # 9NN: sentences of docs/protocol.md that no case tested until the spec-coverage sweep
    # (each tagged with its case there; docs/spec-coverage-gaps.txt lists those still open).
    Case("SEC-901", "MUST", "The runner MUST keep the Hermes session token in memory only: no "
         "file under the config directory (state included) holds it after a run.", "8.1", _F),
    Case("SEC-902", "MUST", "The runner MUST validate a session token with GET /api/profiles "
         "before it uses it for anything else.", "8.1", _F),
    Case("SEC-903", "SHOULD", "After a 401 on HTTP (Hermes restarted with a new token) the "
         "runner SHOULD fetch the token again and retry, so the command succeeds.", "8.1", _F),
    Case("SEC-904", "SHOULD", "After a WebSocket refusal (a stale token) the runner SHOULD "
         "authenticate again and retry, so gateway.open succeeds.", "8.1", _F),
    Case("SEC-905", "MUST", "The runner MUST NOT use token mode with a hermesURL that carries "
         "userinfo: it refuses the file (exit 1) or relays nothing that needs the token.",
         "8.1", _F),
    Case("SEC-906", "MUST", "The runner MUST NOT pass the runner token, the Hermes password or "
         "the Hermes session token to a child process's environment or command line.",
         "1.5", _F),
)
