"""Every error code the simulated control plane answers, with its HTTP status and fixed message.

Rules:
- One table per package: a refusal anywhere in ``fake_server`` names a row of ``CODES`` and is
  built by ``error_body``; no module writes ``{"error", "code"}`` by hand.
- ``docs/protocol.md``'s code table is checked against this table by a test.
- Messages never echo request values (no token, no path, no body).
"""

from __future__ import annotations

from dataclasses import dataclass

NO_STORE: dict[str, str] = {"Cache-Control": "no-store"}


@dataclass(frozen=True)
class Code:
    code: str
    status: int
    message: str


def _table(*rows: Code) -> dict[str, Code]:
    table: dict[str, Code] = {}
    for row in rows:
        if row.code in table:
            raise ValueError(f"duplicate code {row.code}")
        table[row.code] = row
    return table


# Rows are added per area; keep each area's rows together.
CODES: dict[str, Code] = _table(
    # --- machine API, hub, relay (lifecycle) ---
    Code("runner_offline", 503, "runner offline"),
    Code("runner_command_uncertain", 504, "runner command outcome uncertain"),
    Code("runner_command_not_admitted", 409, "channel closed"),
    Code("runner_error", 502, "runner error"),
    Code("runner_authorization_revoked", 403, "authorization revoked"),
    Code("runner_profile_forbidden", 403, "profile not allowed"),
    Code("runner_busy", 429, "runner busy"),
    Code("runner_payload_limit", 413, "command too large"),
    Code("runner_instance_changed", 409, "runner instance changed"),
    Code("runner_connection_closed", 410, "runner connection closed"),
    Code("runner_lease_expired", 410, "runner lease expired"),
    Code("team_tool_not_found", 404, "tool not found"),
    Code("team_tool_failed", 502, "tool failed"),
    Code("invalid_workspace_request", 400, "invalid request"),
    Code("not_found", 404, "unknown runner route"),
    Code("method_not_allowed", 405, "method not allowed"),
    Code("internal_error", 500, "internal error"),
    Code("service_unavailable", 503, "injected failure"),
    Code("service_stopping", 503, "control plane stopping or restarting"),
    Code("compose_desktop_forbidden", 403, "compose desktop not allowed"),
    Code("execution_grant_revoked", 403, "execution grant revoked"),
    Code("request_header_too_large", 431, "request line or header too large"),
    Code("bad_request", 400, "malformed HTTP request"),
    # --- gates, admin, artifacts ---
)


def error_body(code: str, message: str | None = None) -> dict[str, str]:
    """``{"error": message, "code": code}`` for a row of ``CODES`` (message defaults to the row's)."""
    row = CODES.get(code)
    return {"error": message if message is not None else (row.message if row else code), "code": code}


def status_of(code: str) -> int:
    return CODES[code].status
