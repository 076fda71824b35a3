"""Reading the payloads of lease.create / lease.bind / lease.close (§3, §6), and the errors
that refuse them.

Rules:
- A malformed lease id (not a UUID), session, catalog or text field is refused with a plain
  error (code ``runner_error``) naming the field, never echoing its value.
- A catalog is a list of ``{id, name, …}`` objects with non-empty, distinct ids.
- A session not owned by this runner is 403 ``runner_session_forbidden``; an unknown, disposed
  or expired lease is 410 ``runner_lease_expired``.
The lease-id format is also the control plane's; it is written independently in fake_server on
purpose.
"""
from __future__ import annotations

from typing import Any

from runner_ref import codes
from runner_ref.errors import CommandError
from runner_ref.timings import UUID_RE

from .listener import ToolSpec


def _plain(message: str) -> CommandError:
    return CommandError.of(codes.RUNNER_ERROR, message)


def _forbidden() -> CommandError:
    return CommandError.of(codes.SESSION_FORBIDDEN, "session not owned by this runner")


def _expired() -> CommandError:
    return CommandError.of(codes.LEASE_EXPIRED)


def _lease_id(payload: Any) -> str:
    lease_id = payload.get("leaseId") if isinstance(payload, dict) else None
    if not isinstance(lease_id, str) or not UUID_RE.match(lease_id):
        raise _plain("invalid lease id")
    return lease_id


def _session(payload: dict[str, Any]) -> tuple[str, str | None]:
    session = payload.get("session")
    runtime = session.get("runtimeId") if isinstance(session, dict) else None
    stored = session.get("storedId") if isinstance(session, dict) else None
    if not isinstance(runtime, str) or not runtime or not (stored is None or isinstance(stored, str)):
        raise _plain("invalid lease session")
    return runtime, stored or None


def _catalog(payload: dict[str, Any]) -> list[ToolSpec]:
    catalog = payload.get("catalog")
    if not isinstance(catalog, list):
        raise _plain("invalid lease catalog")
    tools: list[ToolSpec] = []
    for entry in catalog:
        if not (isinstance(entry, dict) and isinstance(entry.get("id"), str) and entry["id"]
                and isinstance(entry.get("name"), str)):
            raise _plain("invalid lease catalog")
        tools.append(ToolSpec.from_catalog(entry))
    if len({t.id for t in tools}) != len(tools):
        raise _plain("invalid lease catalog")
    return tools


def _text(payload: dict[str, Any], key: str) -> str:
    value = payload.get(key)
    if not isinstance(value, str) or not value:
        raise _plain(f"invalid lease {key}")
    return value
