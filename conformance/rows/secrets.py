"""Catalogue rows of the secrets cases (tests: conformance/cases/test_secrets.py)."""

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
)
