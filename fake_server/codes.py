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


def code_table(*rows: Code) -> dict[str, Code]:
    table: dict[str, Code] = {}
    for row in rows:
        if row.code in table:
            raise ValueError(f"duplicate code {row.code}")
        table[row.code] = row
    return table


# Rows are added per area; keep each area's rows together.
CODES: dict[str, Code] = code_table(
    # --- machine API, hub, relay (lifecycle) ---
    Code("runner_offline", 503, "runner offline"),
    Code("runner_command_uncertain", 504, "runner command outcome uncertain"),
    Code("runner_command_not_admitted", 409, "channel closed"),
    Code("runner_error", 502, "runner error"),
    Code("runner_authorization_revoked", 403, "authorization revoked"),
    Code("runner_busy", 429, "runner busy"),
    Code("runner_connection_closed", 410, "runner connection closed"),
    Code("runner_lease_expired", 410, "runner lease expired"),
    Code("team_tool_not_found", 404, "tool not found"),
    Code("team_tool_failed", 502, "tool failed"),
    Code("service_unavailable", 503, "injected failure"),
    Code("service_stopping", 503, "control plane stopping or restarting"),
    Code("service_updating", 503, "control plane updating"),  # only as an injected fault
    Code("runner_call_limit", 429, "too many tool calls for this lease"),
    Code("compose_desktop_forbidden", 403, "compose desktop not allowed"),
    Code("execution_grant_revoked", 403, "execution grant revoked"),
    Code("request_header_too_large", 431, "request line or header too large"),
    Code("bad_request", 400, "malformed HTTP request"),
    # --- gates, admin, artifacts ---
    # machine-API gates (§2.3), in gate order
    Code("invalid_host", 421, "invalid host"),
    Code("runner_unauthorized", 403, "runner unauthorized"),
    Code("not_found", 404, "unknown route"),
    Code("runner_protocol_mismatch", 409, "runner protocol mismatch"),
    Code("runner_instance_changed", 409, "runner instance changed"),
    Code("runner_instance_retired", 409, "runner instance retired"),
    Code("runner_instance_limit", 409, "too many replaced runner instances"),
    Code("runner_epoch_changed", 409, "runner epoch changed"),
    Code("method_not_allowed", 405, "method not allowed"),
    Code("runner_payload_limit", 413, "request body too large"),
    Code("invalid_json", 400, "invalid JSON body"),
    # artifact uploads (§2.6); artifact_invalid is also sent with 409 (chunk order or size)
    Code("invalid_workspace_request", 400, "invalid request"),
    Code("artifact_forbidden", 403, "artifact channel is not available"),
    Code("artifact_invalid", 400, "artifact request is invalid"),
    Code("idempotency_conflict", 409, "id reused with different content"),
    Code("artifact_limit", 429, "too many artifact uploads"),
    Code("artifact_missing", 404, "unknown artifact upload"),
    Code("artifact_incomplete", 409, "artifact upload is incomplete"),
    Code("artifact_digest_mismatch", 409, "artifact digest does not match"),
    # admin API (§7), in check order; invalid_json_body is also sent with 413 (body too large)
    Code("invalid_origin", 403, "cross-origin request refused"),
    Code("invalid_csrf", 403, "missing or wrong CSRF token"),
    Code("invalid_content_type", 415, "body must be application/json"),
    Code("invalid_json_body", 400, "body is not valid JSON"),
    Code("authentication_required", 401, "sign in first"),
    Code("admin_required", 403, "administrator account required"),
    Code("invalid_credentials", 401, "wrong user name or password"),
    Code("invalid_assigned_profiles", 400, "invalid profile names"),
    Code("runner_profile_forbidden", 403, "profile not allowed for this account or source"),
    Code("runner_source_invalid", 409, "source cannot host a runner"),
    Code("runner_source_in_use", 409, "source already has a runner"),
    Code("workspace_not_found", 404, "not found"),
    Code("runner_bundle_missing", 404, "runner bundle not built"),
    Code("internal_error", 500, "internal error"),
)


def error_body(code: str, message: str | None = None) -> dict[str, str]:
    """``{"error": message, "code": code}`` for a row of ``CODES`` (message defaults to the row's)."""
    row = CODES.get(code)
    return {"error": message if message is not None else (row.message if row else code), "code": code}


def status_of(code: str) -> int:
    return CODES[code].status
