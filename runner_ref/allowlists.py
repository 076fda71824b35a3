"""What the runner lets through to Hermes (protocol 1 §3), as data.

Rules:
- HTTP: only GET, only the paths of :data:`HTTP_GET_PATHS`; anything else → 403
  ``runner_http_forbidden``. The profile check (``requireProfile``) applies to every allowed
  path except ``/api/status`` and ``/api/profiles``.
- Gateway RPC: only :data:`RPC_METHODS` (else 403 ``runner_command_forbidden``); on a
  cleanup-only channel only :data:`CLEANUP_METHODS` (else 403 ``runner_cleanup_forbidden``).
- ``session.create`` / ``session.resume`` need the profile; every other method needs a
  ``session_id`` owned by the channel (403 ``runner_session_forbidden``).
- A profile is allowed iff it is one of the config's ``allowedProfiles``
  (403 ``runner_profile_forbidden``). A missing profile means ``default``.
The same rules are written independently in fake_server on purpose.
"""
from __future__ import annotations

import re
from collections.abc import Iterable

from . import codes
from .errors import CommandError
from .js_text import js_trim

MEMORY_EXTRACT = "/api/plugins/yaoyao-bot-bridge/memory-extract"
COMPUTER_CAPABILITIES = "/api/computer/capabilities"
DOWNLOAD = "/api/files/download"
SESSION_MESSAGES_RE = re.compile(r"^/api/sessions/[^/]+/messages$")

#: (name, matcher, needs profile)
HTTP_GET_PATHS: tuple[tuple[str, re.Pattern[str], bool], ...] = (
    ("status", re.compile(r"^/api/status$"), False),
    ("profiles", re.compile(r"^/api/profiles$"), False),
    ("config", re.compile(r"^/api/config$"), True),
    ("session_messages", re.compile(r"^/api/sessions/[A-Za-z0-9_.-]{1,200}/messages$"), True),
    ("capabilities", re.compile(r"^/api/plugins/yaoyao-bot-bridge/capabilities$"), True),
    ("download", re.compile(r"^/api/files/download$"), True),
)

RPC_METHODS = frozenset({
    "session.create", "session.resume", "session.close", "session.usage", "session.interrupt",
    "session.active_list", "session.cwd.set", "prompt.submit", "session.steer",
    "image.attach_bytes", "file.attach", "approval.respond", "clarify.respond",
})
CLEANUP_METHODS = frozenset({
    "session.resume", "session.interrupt", "session.close", "session.active_list"})
PROFILE_METHODS = frozenset({"session.create", "session.resume"})
DEFAULT_PROFILE = "default"


def require_profile(profile: object, allowed: Iterable[str]) -> str:
    """The profile to use, or 403 ``runner_profile_forbidden``."""
    name = DEFAULT_PROFILE if profile is None else profile
    if not isinstance(name, str) or js_trim(name) not in set(allowed):
        raise CommandError.of(codes.PROFILE_FORBIDDEN)
    return js_trim(name)


def http_route(method: object, path: object) -> tuple[str, bool]:
    """Classify an HTTP request: (route name, needs profile) or 403 ``runner_http_forbidden``."""
    if method == "GET" and isinstance(path, str):
        for name, pattern, needs_profile in HTTP_GET_PATHS:
            if pattern.match(path):
                return name, needs_profile
    raise CommandError.of(codes.HTTP_FORBIDDEN)


def check_rpc_method(method: object, cleanup_only: bool) -> str:
    """The RPC allowlist, then the cleanup-channel list."""
    if not isinstance(method, str) or method not in RPC_METHODS:
        raise CommandError.of(codes.COMMAND_FORBIDDEN)
    if cleanup_only and method not in CLEANUP_METHODS:
        raise CommandError.of(codes.CLEANUP_FORBIDDEN)
    return method
