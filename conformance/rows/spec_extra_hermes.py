"""Catalogue rows of spec-coverage cases for the runner's Hermes authentication (protocol 1
§8.1; tests: conformance/cases/test_spec_extra_hermes.py). IDs 900–999."""

from __future__ import annotations

from ..case_row import Case

_SEC = "secrets"

ROWS: tuple[Case, ...] = (
    Case("SEC-901", "MUST", "The runner MUST keep the Hermes session token in memory only: no "
         "file under the config directory (state included) holds it after a run.", "8.1", _SEC),
    Case("SEC-902", "MUST", "The runner MUST validate a session token with GET /api/profiles "
         "before it uses it for anything else.", "8.1", _SEC),
    Case("SEC-903", "SHOULD", "After a 401 on HTTP (Hermes restarted with a new token) the "
         "runner SHOULD fetch the token again and retry, so the command succeeds.", "8.1", _SEC),
    Case("SEC-904", "SHOULD", "After a WebSocket refusal (a stale token) the runner SHOULD "
         "authenticate again and retry, so gateway.open succeeds.", "8.1", _SEC),
    Case("SEC-905", "MUST", "The runner MUST NOT use token mode with a hermesURL that carries "
         "userinfo: it refuses the file (exit 1) or relays nothing that needs the token.",
         "8.1", _SEC),
    Case("SEC-906", "MUST", "The runner MUST NOT pass the runner token, the Hermes password or "
         "the Hermes session token to a child process's environment or command line.",
         "1.5", _SEC),
)
