"""Every error code the simulated control plane answers, with its HTTP status and fixed message.

Rules:
- One table per package: a refusal anywhere in ``fake_server`` names a row of this module (a
  constant such as ``RUNNER_OFFLINE``) and its body is built by ``error_body``; no other module
  spells a code string or writes ``{"error", "code"}`` by hand (``tests/fake_server/test_codes.py``
  scans the package; the team world's rows live in ``fake_server/team/codes.py``).
- A row's status is the one it is sent with; where a code is also sent with a second status
  (noted at its row) the use site passes that status beside the row.
- An injected fault (``cp.faults``) may carry any code a test names: ``error_body`` accepts a
  code string for those, and falls back to the code as the message for one outside the table.
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


# One constant a row; keep each area's rows together.
# --- machine API, hub, relay (lifecycle) ---
RUNNER_OFFLINE = Code("runner_offline", 503, "runner offline")
RUNNER_COMMAND_UNCERTAIN = Code("runner_command_uncertain", 504, "runner command outcome uncertain")
RUNNER_COMMAND_NOT_ADMITTED = Code("runner_command_not_admitted", 409, "channel closed")  # 403 at enqueue
RUNNER_ERROR = Code("runner_error", 502, "runner error")
RUNNER_AUTHORIZATION_REVOKED = Code("runner_authorization_revoked", 403, "authorization revoked")
RUNNER_BUSY = Code("runner_busy", 429, "runner busy")
RUNNER_CONNECTION_CLOSED = Code("runner_connection_closed", 410, "runner connection closed")
RUNNER_LEASE_EXPIRED = Code("runner_lease_expired", 410, "runner lease expired")
TEAM_TOOL_NOT_FOUND = Code("team_tool_not_found", 404, "tool not found")
TEAM_TOOL_FAILED = Code("team_tool_failed", 502, "tool failed")
SERVICE_UNAVAILABLE = Code("service_unavailable", 503, "injected failure")
SERVICE_STOPPING = Code("service_stopping", 503, "control plane stopping or restarting")
SERVICE_UPDATING = Code("service_updating", 503, "control plane updating")  # only as an injected fault
RUNNER_CALL_LIMIT = Code("runner_call_limit", 429, "too many tool calls for this lease")
COMPOSE_DESKTOP_FORBIDDEN = Code("compose_desktop_forbidden", 403, "compose desktop not allowed")
EXECUTION_GRANT_REVOKED = Code("execution_grant_revoked", 403, "execution grant revoked")
REQUEST_HEADER_TOO_LARGE = Code("request_header_too_large", 431, "request line or header too large")
BAD_REQUEST = Code("bad_request", 400, "malformed HTTP request")
# --- gates, admin, artifacts ---
# machine-API gates (§2.3), in gate order
INVALID_HOST = Code("invalid_host", 421, "invalid host")
RUNNER_UNAUTHORIZED = Code("runner_unauthorized", 403, "runner unauthorized")
NOT_FOUND = Code("not_found", 404, "unknown route")
RUNNER_PROTOCOL_MISMATCH = Code("runner_protocol_mismatch", 409, "runner protocol mismatch")
RUNNER_INSTANCE_CHANGED = Code("runner_instance_changed", 409, "runner instance changed")
RUNNER_INSTANCE_RETIRED = Code("runner_instance_retired", 409, "runner instance retired")
RUNNER_INSTANCE_LIMIT = Code("runner_instance_limit", 409, "too many replaced runner instances")
RUNNER_EPOCH_CHANGED = Code("runner_epoch_changed", 409, "runner epoch changed")
METHOD_NOT_ALLOWED = Code("method_not_allowed", 405, "method not allowed")
RUNNER_PAYLOAD_LIMIT = Code("runner_payload_limit", 413, "request body too large")
INVALID_JSON = Code("invalid_json", 400, "invalid JSON body")
# artifact uploads (§2.6); artifact_invalid is also sent with 409 (chunk order or size)
INVALID_WORKSPACE_REQUEST = Code("invalid_workspace_request", 400, "invalid request")
ARTIFACT_FORBIDDEN = Code("artifact_forbidden", 403, "artifact channel is not available")
ARTIFACT_INVALID = Code("artifact_invalid", 400, "artifact request is invalid")
IDEMPOTENCY_CONFLICT = Code("idempotency_conflict", 409, "id reused with different content")
ARTIFACT_LIMIT = Code("artifact_limit", 429, "too many artifact uploads")
ARTIFACT_MISSING = Code("artifact_missing", 404, "unknown artifact upload")
ARTIFACT_INCOMPLETE = Code("artifact_incomplete", 409, "artifact upload is incomplete")
ARTIFACT_DIGEST_MISMATCH = Code("artifact_digest_mismatch", 409, "artifact digest does not match")
# admin API (§7), in check order; invalid_json_body is also sent with 413 (body too large)
INVALID_ORIGIN = Code("invalid_origin", 403, "cross-origin request refused")
INVALID_CSRF = Code("invalid_csrf", 403, "missing or wrong CSRF token")
INVALID_CONTENT_TYPE = Code("invalid_content_type", 415, "body must be application/json")
INVALID_JSON_BODY = Code("invalid_json_body", 400, "body is not valid JSON")
AUTHENTICATION_REQUIRED = Code("authentication_required", 401, "sign in first")
ADMIN_REQUIRED = Code("admin_required", 403, "administrator account required")
INVALID_CREDENTIALS = Code("invalid_credentials", 401, "wrong user name or password")
INVALID_ASSIGNED_PROFILES = Code("invalid_assigned_profiles", 400, "invalid profile names")
RUNNER_PROFILE_FORBIDDEN = Code("runner_profile_forbidden", 403, "profile not allowed for this account or source")
RUNNER_SOURCE_INVALID = Code("runner_source_invalid", 409, "source cannot host a runner")
RUNNER_SOURCE_IN_USE = Code("runner_source_in_use", 409, "source already has a runner")
WORKSPACE_NOT_FOUND = Code("workspace_not_found", 404, "not found")
RUNNER_BUNDLE_MISSING = Code("runner_bundle_missing", 404, "runner bundle not built")
INTERNAL_ERROR = Code("internal_error", 500, "internal error")

CODES: dict[str, Code] = code_table(
    RUNNER_OFFLINE, RUNNER_COMMAND_UNCERTAIN, RUNNER_COMMAND_NOT_ADMITTED, RUNNER_ERROR,
    RUNNER_AUTHORIZATION_REVOKED, RUNNER_BUSY, RUNNER_CONNECTION_CLOSED, RUNNER_LEASE_EXPIRED,
    TEAM_TOOL_NOT_FOUND, TEAM_TOOL_FAILED, SERVICE_UNAVAILABLE, SERVICE_STOPPING, SERVICE_UPDATING,
    RUNNER_CALL_LIMIT, COMPOSE_DESKTOP_FORBIDDEN, EXECUTION_GRANT_REVOKED, REQUEST_HEADER_TOO_LARGE,
    BAD_REQUEST, INVALID_HOST, RUNNER_UNAUTHORIZED, NOT_FOUND, RUNNER_PROTOCOL_MISMATCH,
    RUNNER_INSTANCE_CHANGED, RUNNER_INSTANCE_RETIRED, RUNNER_INSTANCE_LIMIT, RUNNER_EPOCH_CHANGED,
    METHOD_NOT_ALLOWED, RUNNER_PAYLOAD_LIMIT, INVALID_JSON, INVALID_WORKSPACE_REQUEST,
    ARTIFACT_FORBIDDEN, ARTIFACT_INVALID, IDEMPOTENCY_CONFLICT, ARTIFACT_LIMIT, ARTIFACT_MISSING,
    ARTIFACT_INCOMPLETE, ARTIFACT_DIGEST_MISMATCH, INVALID_ORIGIN, INVALID_CSRF,
    INVALID_CONTENT_TYPE, INVALID_JSON_BODY, AUTHENTICATION_REQUIRED, ADMIN_REQUIRED,
    INVALID_CREDENTIALS, INVALID_ASSIGNED_PROFILES, RUNNER_PROFILE_FORBIDDEN, RUNNER_SOURCE_INVALID,
    RUNNER_SOURCE_IN_USE, WORKSPACE_NOT_FOUND, RUNNER_BUNDLE_MISSING, INTERNAL_ERROR,
)


def error_body(code: Code | str, message: str | None = None) -> dict[str, str]:
    """``{"error": message, "code": code}`` for a row (message defaults to the row's).

    A code string is looked up in ``CODES`` (an injected fault's code may be outside it)."""
    row = code if isinstance(code, Code) else CODES.get(code)
    name = code.code if isinstance(code, Code) else code
    return {"error": message if message is not None else (row.message if row else name), "code": name}


def status_of(code: str) -> int:
    return CODES[code].status


def refusal(row: Code, message: str | None = None) -> tuple[int, dict[str, str]]:
    """``(status, body)`` for a row: the answer a route returns."""
    return row.status, error_body(row, message)
