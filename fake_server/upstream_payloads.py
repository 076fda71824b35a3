"""What upstream's control plane sends, per command kind (docs/protocol.md §3), as data that runs.

Rules:
- ``KINDS``: one row per core kind: the payload keys upstream always sends, the keys it may send,
  and a check of the values it constrains; a payload with another key, a missing key or a value
  upstream would not send is *not as upstream sends it* (:func:`problems` says why).
- ``RPC_PARAMS``: per ``gateway.rpc`` method, the ``params`` keys upstream always sends. "The
  control plane always names the profile": ``params.profile`` on ``session.create``,
  ``session.resume`` and ``session.active_list`` (the latter exactly
  ``{profile, current_session_id}``); an ``http`` command names it in ``search``.
- :func:`complete` fills what the caller left out the way upstream's control plane fills it
  (the channel's profile, else ``default``, upstream's reading of a missing one), so a harness
  helper that omits the profile still sends what upstream sends. A case whose purpose is a
  command upstream would not send says so (``as_sent=True`` on the verbs): it is sent as given.
- Extension kinds (§9) and kinds the protocol does not have are not upstream core payloads: a
  case sends them only on purpose (``as_sent=True``).
Sans-IO: no I/O, no hub; ``fake_server.verbs`` and ``tests/`` both run this table.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, quote

DEFAULT_PROFILE = "default"  # upstream reads a missing profile as `default` (§3)
UUID_LOWER = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
#: gateway.rpc methods whose params name the profile, and the exact params of active_list
PROFILE_METHODS = frozenset({"session.create", "session.resume", "session.active_list"})
ACTIVE_LIST_PARAMS = frozenset({"profile", "current_session_id"})
SESSION_METHODS = frozenset({
    "session.close", "session.usage", "session.interrupt", "session.cwd.set", "prompt.submit",
    "session.steer", "image.attach_bytes", "file.attach", "approval.respond", "clarify.respond"})
RPC_METHODS = PROFILE_METHODS | SESSION_METHODS
#: params upstream always sends, per method (others may come along: Hermes' own fields)
RPC_PARAMS: dict[str, frozenset[str]] = {
    "session.create": frozenset({"profile"}),
    "session.resume": frozenset({"profile", "session_id"}),
    "session.active_list": ACTIVE_LIST_PARAMS,
    **{m: frozenset({"session_id"}) for m in SESSION_METHODS},
}


def search_profile(search: object) -> str | None:
    """The ``profile`` parameter of an http ``search`` (``""`` or ``"?…"``), else None."""
    if not isinstance(search, str) or not search.startswith("?"):
        return None
    values = parse_qs(search[1:]).get("profile")
    return values[0] if values else None


def _http(p: dict[str, Any]) -> list[str]:
    out = []
    if not isinstance(p.get("path"), str) or not str(p["path"]).startswith("/"):
        out.append("path is not an absolute URL path")
    if not isinstance(p.get("method"), str):
        out.append("method is not a string")
    search = p.get("search")
    if not isinstance(search, str) or (search and not search.startswith("?")):
        out.append("search is not URL.search (empty or beginning with '?')")
    elif search_profile(search) is None:
        out.append("search names no profile")
    return out


def _uuid(key: str) -> Callable[[dict[str, Any]], list[str]]:
    return lambda p: [] if isinstance(p.get(key), str) and UUID_LOWER.match(p[key]) else [
        f"{key} is not a lower-case UUID"]


def _rpc(p: dict[str, Any]) -> list[str]:
    out = _uuid("connectionId")(p)
    method, params = p.get("method"), p.get("params")
    if method not in RPC_METHODS:
        return out + [f"method {method!r} is not one upstream sends"]
    if not isinstance(params, dict):
        return out + ["params is not an object"]
    missing = sorted(RPC_PARAMS[str(method)] - set(params))
    if missing:
        out.append(f"{method} params lack {', '.join(missing)}")
    if method == "session.active_list" and set(params) != ACTIVE_LIST_PARAMS:
        out.append("session.active_list params are not exactly {profile, current_session_id}")
    if "profile" in params and not isinstance(params.get("profile"), str):
        out.append(f"{method} params.profile is not a string")
    return out


def _session(p: dict[str, Any]) -> list[str]:
    s = p.get("session")
    return [] if isinstance(s, dict) and set(s) == {"runtimeId", "storedId"} else [
        "session is not {runtimeId, storedId}"]


def _lease_create(p: dict[str, Any]) -> list[str]:
    out = _session(p)
    if not isinstance(p.get("profile"), str):
        out.append("profile is not a string")
    if not isinstance(p.get("catalog"), list):
        out.append("catalog is not a list")
    return out


@dataclass(frozen=True)
class Kind:
    name: str
    required: frozenset[str]
    optional: frozenset[str]
    check: Callable[[dict[str, Any]], list[str]]


def _kind(name: str, required: str, optional: str, check: Callable[[dict[str, Any]], list[str]]) -> Kind:
    return Kind(name, frozenset(required.split()), frozenset(optional.split()), check)


KINDS: dict[str, Kind] = {k.name: k for k in (
    _kind("http", "path method search", "body computer", _http),
    _kind("gateway.open", "connectionId", "computer workId cleanupOnly", _uuid("connectionId")),
    _kind("gateway.rpc", "connectionId method params", "", _rpc),
    _kind("gateway.close", "connectionId", "", lambda p: []),
    _kind("lease.create", "leaseId profile workId session catalog workspaceMemory", "computerPolicy",
          _lease_create),
    _kind("lease.bind", "leaseId session", "", _session),
    _kind("lease.close", "leaseId", "", lambda p: []),
)}


def problems(kind: str, payload: Any) -> list[str]:
    """Why upstream's control plane would not send this command ([] when it could)."""
    row = KINDS.get(kind)
    if row is None:
        return [f"kind {kind!r} is not a core kind upstream sends"]
    if not isinstance(payload, dict):
        return ["payload is not an object"]
    out = [f"lacks {k}" for k in sorted(row.required - set(payload))]
    out += [f"has {k}, which upstream never sends" for k in sorted(set(payload) - row.required - row.optional)]
    return out + row.check(payload)


def complete(kind: str, payload: dict[str, Any], profile: str | None) -> dict[str, Any]:
    """``payload`` with the profile filled where upstream always names one and the caller did
    not (``profile``: the channel's or the command's, else ``default``). A new dict when it
    changes anything; the caller's dict is never modified. Idempotent."""
    name = profile or DEFAULT_PROFILE
    if kind == "http" and isinstance(payload.get("search", ""), str):
        search = str(payload.get("search", ""))
        if (not search or search.startswith("?")) and search_profile(search) is None:
            rest = search[1:]
            return {**payload, "search": f"?profile={quote(name, safe='')}" + (f"&{rest}" if rest else "")}
    if kind == "gateway.rpc" and payload.get("method") in PROFILE_METHODS:
        params = payload.get("params")
        if isinstance(params, dict) and "profile" not in params:
            return {**payload, "params": {**params, "profile": name}}
    return payload
