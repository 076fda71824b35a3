"""Strict bodies of the admin API (upstream's zod schemas) and the profile validator.

Rules:
- A body is a JSON object with exactly the schema's keys (unknown keys, wrong types, lengths out
  of range → 400 ``invalid_workspace_request``), as upstream's strict zod objects.
- ``allowedProfiles``: the schema wants 1-256 strings of 1-100 characters; then
  ``validate_assigned_profiles`` refuses a blank name or one with ``/``, ``\\`` or a control
  character (400 ``invalid_assigned_profiles``, upstream's ``validateAssignedProfiles`` code),
  trims the names and drops repeats (⚑ upstream's normalisation was not traced).
- ``sourceNodeId`` is not trimmed (upstream: ``" local "`` is an unknown source).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from . import codes
from .codes import Code
from .tool_calls import js_length

NAME_MAX = 100
PROFILES_MAX = 256
PROFILE_MAX = 100
LOGIN_FIELD_MAX = 4096
_PROFILE_BAD = re.compile(r"[/\\\x00-\x1f]")
#: ``String.prototype.trim``'s set (zod's ``.trim()``), not Python's ``str.isspace``: Python also
#: strips U+001C-U+001F and U+0085 and keeps U+FEFF. runner_ref has its own copy on purpose.
_JS_WHITESPACE = ("\t\n\v\f\r \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007"
                  "\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000\ufeff")


class AdminError(Exception):
    """A refusal that becomes ``{"error","code"}`` with ``status``."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


def refused(row: Code, message: str | None = None) -> AdminError:
    """A refusal named by its row of ``codes`` (status and default message from there)."""
    return AdminError(row.status, row.code, row.message if message is None else message)


def _bad(message: str) -> AdminError:
    return refused(codes.INVALID_WORKSPACE_REQUEST, message)


def _text(value: Any, *, lo: int, hi: int, what: str, trim: bool = True) -> str:
    if not isinstance(value, str):
        raise _bad(f"{what} must be a string")
    text = value.strip(_JS_WHITESPACE) if trim else value
    if not lo <= js_length(text) <= hi:   # zod counts UTF-16 units
        raise _bad(f"{what} must be {lo}–{hi} characters")
    return text


def _profiles(value: Any) -> list[str]:
    """The schema's part (a list of 1-256 strings of 1-100 characters), then the profile
    validator's (blank or bad characters → ``invalid_assigned_profiles``)."""
    if not isinstance(value, list) or not 1 <= len(value) <= PROFILES_MAX:
        raise _bad(f"allowedProfiles must be a list of 1–{PROFILES_MAX} profiles")
    for item in value:
        _text(item, lo=1, hi=PROFILE_MAX, what="profile", trim=False)
    return validate_assigned_profiles(value)


def validate_assigned_profiles(names: list[str]) -> list[str]:
    """Trimmed, de-duplicated profile names; a blank one or a path character refuses all."""
    out: list[str] = []
    for item in names:
        name = item.strip(_JS_WHITESPACE)
        if not name or _PROFILE_BAD.search(name):
            raise refused(codes.INVALID_ASSIGNED_PROFILES,
                           "profile names cannot be blank or contain '/', '\\' or control characters")
        if name not in out:
            out.append(name)
    return out


Validator = Callable[[Any], Any]
REGISTRATION_SCHEMA: dict[str, tuple[bool, Validator]] = {
    "name": (True, lambda v: _text(v, lo=1, hi=NAME_MAX, what="name")),
    "sourceNodeId": (False, lambda v: _text(v, lo=1, hi=NAME_MAX, what="sourceNodeId", trim=False)),
    "allowedProfiles": (True, _profiles),
}
LOGIN_SCHEMA: dict[str, tuple[bool, Validator]] = {
    "username": (True, lambda v: _text(v, lo=1, hi=256, what="username")),
    "password": (True, lambda v: _text(v, lo=1, hi=LOGIN_FIELD_MAX, what="password", trim=False)),
}


def validate(body: Any, schema: dict[str, tuple[bool, Validator]]) -> dict[str, Any]:
    """Check ``body`` against a strict schema; unknown keys are refused."""
    if not isinstance(body, dict):
        raise _bad("body must be a JSON object")
    extra = sorted(set(body) - set(schema))
    if extra:
        raise _bad("unknown field(s): " + ", ".join(k[:40] for k in extra[:5]))
    out: dict[str, Any] = {}
    for key, (required, check) in schema.items():
        if key not in body:
            if required:
                raise _bad(f"{key} is required")
            continue
        out[key] = check(body[key])
    return out
