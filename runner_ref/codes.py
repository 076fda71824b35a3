"""Every error code the reference runner sends, with its status and fixed message; the builders.

Rules:
- One table: every refusal or failure anywhere in ``runner_ref`` names a row of this module and
  its body is built here (:func:`error_result`, :func:`error_body`, :func:`error_text`); no
  other module writes a code string or an ``{"error", "code"}`` body by hand
  (``tests/runner_ref/test_codes.py`` scans the package for it).
- A row is (code, status, message, sent as). The same code may have two rows when it is sent
  with two statuses or on two surfaces. The message is the default; a use site may pass a more
  precise one (never one built from a secret or a request value).
- Surfaces (``sent_as``):
  ``result``   — a command's coded error result ``{"error": {"message", "code"}}`` (protocol 1
                 §3/§4). Its status is informational: the control plane shows every runner error
                 to its caller as 502 with the code.
  ``listener`` — an HTTP answer of a lease's loopback listener ``{"error", "code"}`` (§6), sent
                 with this status.
  ``envelope`` — a failed team tool call: HTTP 200 with an MCP ``isError`` envelope whose text is
                 ``{"error", "code"}``.
  ``client``   — what the machine-API client reports when the control plane fails it without a
                 code of its own (forwarded in results and envelopes).
- Messages are capped at :data:`runner_ref.timings.ERROR_TEXT_CAP` characters in results.
The fake control plane keeps its own table (``fake_server/codes.py``): the codes both send are
written independently in fake_server on purpose; ``docs/protocol.md``'s code table is checked
against both.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

from .timings import ERROR_TEXT_CAP

Surface = Literal["result", "listener", "envelope", "client"]


@dataclass(frozen=True)
class Code:
    code: str
    status: int
    message: str
    sent_as: Surface = "result"


# -- command results: the ledger (§4) ------------------------------------------------------------
COMMAND_NOT_ADMITTED = Code("runner_command_not_admitted", 403, "command not admitted")
IDEMPOTENCY_CONFLICT = Code("idempotency_conflict", 409,
                            "command id reused with a different payload")
COMMAND_UNCERTAIN = Code("runner_command_uncertain", 409, "original command needs reconciliation")
# -- command results: dispatch and kinds (§3) ----------------------------------------------------
RUNNER_ERROR = Code("runner_error", 400, "command failed")
COMMAND_UNKNOWN = Code("runner_command_unknown", 400, "unknown command kind")
FEATURE_UNAVAILABLE = Code("runner_feature_unavailable", 409,
                           "this runner does not provide that feature")
PROFILE_FORBIDDEN = Code("runner_profile_forbidden", 403, "profile not allowed on this runner")
HTTP_FORBIDDEN = Code("runner_http_forbidden", 403, "HTTP operation not allowed")
ARTIFACT_FORBIDDEN = Code("runner_artifact_forbidden", 403, "file is outside the artifact roots")
COMMAND_FORBIDDEN = Code("runner_command_forbidden", 403, "gateway method not allowed")
CLEANUP_FORBIDDEN = Code("runner_cleanup_forbidden", 403, "only cleanup methods on this channel")
SESSION_FORBIDDEN = Code("runner_session_forbidden", 403, "session not owned by this channel")
CONNECTION_CLOSED = Code("runner_connection_closed", 410, "gateway is closed")
LEASE_EXPIRED = Code("runner_lease_expired", 410, "team tools lease expired")
COMPUTER_UNAVAILABLE = Code("computer_unavailable", 409, "this runner has no computers")
COMPUTER_MESSAGES_UNAVAILABLE = Code("computer_unavailable", 403, "this runner has no computers")
COMPUTER_ARTIFACT_REQUIRED = Code("computer_artifact_required", 409, "use a computer artifact")
MEMORY_EXTRACTION_UNAVAILABLE = Code("memory_extraction_unavailable", 409,
                                     "memory extraction needs computers")
SESSION_STOP_UNCONFIRMED = Code("session_stop_unconfirmed", 502, "Hermes gave no session list")
TEAM_TOOLS_BIND_FAILED = Code("team_tools_bind_failed", 409, "team tools bind failed")
TEAM_TOOLS_UNAVAILABLE = Code("team_tools_unavailable", 409, "native tools unavailable")
# -- command results: the local Hermes -----------------------------------------------------------
HERMES_UNAVAILABLE = Code("hermes_unavailable", 502, "local Hermes is not reachable")
HERMES_AUTH_FAILED = Code("hermes_auth_failed", 502,
                          "local Hermes refused the runner's credentials")
HERMES_RESPONSE_TOO_LARGE = Code("hermes_response_too_large", 502,
                                 "Hermes response over the relay limit")
HERMES_RPC_ERROR = Code("hermes_rpc_error", 502, "Hermes error")
# -- the loopback listener (§6), in gate order, then routing and calls ---------------------------
TEAM_TOOLS_FORBIDDEN = Code("team_tools_forbidden", 403, "team tools are loopback only",
                            "listener")
TEAM_TOOLS_UNAUTHORIZED = Code("team_tools_unauthorized", 401, "team tools token required",
                               "listener")
TEAM_TOOLS_EXPIRED = Code("team_tools_expired", 410, "team tools lease expired", "listener")
METHOD_NOT_ALLOWED = Code("method_not_allowed", 405, "method not allowed", "listener")
INVALID_CONTENT_TYPE = Code("invalid_content_type", 415, "JSON content type required",
                            "listener")
TEAM_TOOL_INPUT_LIMIT = Code("team_tool_input_limit", 413, "team tool input too large",
                             "listener")
INVALID_JSON = Code("invalid_json", 400, "invalid JSON", "listener")
REQUEST_TIMEOUT = Code("request_timeout", 408, "request not received in time", "listener")
NOT_FOUND = Code("not_found", 404, "not found", "listener")
TEAM_TOOL_NOT_FOUND = Code("team_tool_not_found", 404, "team tool not found", "listener")
INVALID_TOOL_CALL = Code("invalid_tool_call", 400,
                         "toolId (1-100), callId (1-200) and arguments (object) required",
                         "listener")
CALL_CONFLICT = Code("idempotency_conflict", 409, "callId reused with different input",
                     "listener")
CALL_LIMIT = Code("team_tool_call_limit", 429, "too many team tool calls", "listener")
LISTENER_FAILED = Code("runner_error", 500, "team tools listener failed", "listener")
# -- failed team tool calls (isError envelopes, HTTP 200) ----------------------------------------
TOOL_CALL_FAILED = Code("runner_error", 200, "team tool call failed", "envelope")
TOOL_CALL_STOPPED = Code("team_tools_expired", 200, "team tool call stopped", "envelope")
# -- the machine-API client ----------------------------------------------------------------------
REQUEST_FAILED = Code("runner_request_failed", 502, "control plane unreachable", "client")
UNAUTHORIZED = Code("runner_unauthorized", 403, "runner unauthorized", "client")

#: Every row, in the order above.
CODES: tuple[Code, ...] = tuple(v for v in dict(globals()).values() if isinstance(v, Code))


def _check(rows: tuple[Code, ...]) -> None:
    seen: set[tuple[str, int, str]] = set()
    for row in rows:
        key = (row.code, row.status, row.sent_as)
        if key in seen:
            raise ValueError(f"duplicate code row {key}")
        seen.add(key)


_check(CODES)


def error_result(row: Code | str, message: str | None = None) -> dict[str, Any]:
    """A command's coded error result ``{"error": {"message", "code"}}``, the message capped.
    ``row`` is a row of this table, or a code the control plane sent (forwarded as it is, with
    its message)."""
    if isinstance(row, str):
        code, text = row, message or row
    else:
        code, text = row.code, row.message if message is None else message
    return {"error": {"message": text[:ERROR_TEXT_CAP], "code": code}}


def error_body(row: Code, message: str | None = None) -> dict[str, str]:
    """The listener's HTTP error body ``{"error", "code"}``."""
    return {"error": row.message if message is None else message, "code": row.code}


def error_text(code: str, message: str) -> str:
    """The text of an ``isError`` envelope: JSON ``{"error", "code"}``. ``code`` is a row's code
    or one the control plane sent (forwarded as it is)."""
    return json.dumps({"error": message, "code": code}, ensure_ascii=False)
