"""The admin API's gates (protocol §7, upstream ``app.ts``), as rows of the project's ``Gate``.

Rules (every refusal an admin request can get before its handler runs):
- A mutation passes, in order: ``Origin`` equal to the page's own origin (403
  ``invalid_origin``), then the CSRF double submit (403 ``invalid_csrf``), then the JSON body
  (415 ``invalid_content_type`` ⚑, 413 / 400 ``invalid_json_body``), then a session (401
  ``authentication_required``; an unknown, expired or signed-out session, or an account that
  is no longer active, all look the same), then an admin account (403 ``admin_required``).
  Upstream runs Origin and CSRF for every ``/api/app/`` mutation before its body parser and
  before auth, so a caller without a session learns nothing before those two pass.
- CSRF: the ``X-CSRF-Token`` header (≤ 256 characters) equals the readable CSRF cookie, and is a
  token this server issued at a sign-in that is still held. It is not bound to the session
  cookie (upstream's is a signed cookie, not a per-session value).
- Reads pass session → admin. ``DELETE`` has no body, so its rows skip the body gate.
- ⚑ Login passes Origin → body only: upstream also wants a CSRF token there (issued by a read
  before sign-in); this page gets its token from the login answer. ⚑ A body whose type is not
  ``application/json`` gets 415 here; upstream's body parser leaves such a body unparsed.
- The rows are what runs: ``first_refusal(rows, ask, view)`` from ``gates``.
"""

from __future__ import annotations

import hmac
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

from . import codes
from .gates import Gate, gate_row

CSRF_MAX = 256


@dataclass(frozen=True)
class AdminAsk:
    """The request as the gates see it (headers, cookies and how the body read went)."""

    origin: str | None
    own_origins: frozenset[str]
    csrf_header: str | None
    csrf_cookie: str | None
    body_fault: str | None = None  # None, "type", "size" or "json"


@dataclass(frozen=True)
class AdminView:
    """The server's side: issued CSRF tokens and the caller's session."""

    issued_csrf: AbstractSet[str]
    signed_in: bool  # a live session of an active account
    is_admin: bool


AdminGate = Gate[AdminAsk, AdminView]


def _csrf_ok(ask: AdminAsk, view: AdminView) -> bool:
    sent, cookie = ask.csrf_header or "", ask.csrf_cookie or ""
    if not sent or len(sent) > CSRF_MAX or not cookie:
        return False
    same = hmac.compare_digest(sent.encode("utf-8", "replace"), cookie.encode("utf-8", "replace"))
    return same and sent in view.issued_csrf


ORIGIN: AdminGate = gate_row(
    None, "origin", codes.INVALID_ORIGIN,
    lambda a, v: not a.origin or a.origin not in a.own_origins)
CSRF: AdminGate = gate_row(None, "csrf", codes.INVALID_CSRF, lambda a, v: not _csrf_ok(a, v))
BODY_TYPE: AdminGate = gate_row(
    None, "body type", codes.INVALID_CONTENT_TYPE, lambda a, v: a.body_fault == "type")
BODY_SIZE: AdminGate = Gate(
    None, "body size", 413, codes.INVALID_JSON_BODY.code, "body too large",  # the row's 2nd status
    lambda a, v: a.body_fault == "size")
BODY_JSON: AdminGate = gate_row(
    None, "body json", codes.INVALID_JSON_BODY, lambda a, v: a.body_fault == "json")
SESSION: AdminGate = gate_row(
    None, "session", codes.AUTHENTICATION_REQUIRED, lambda a, v: not v.signed_in)
ADMIN: AdminGate = gate_row(
    None, "admin", codes.ADMIN_REQUIRED, lambda a, v: not (v.signed_in and v.is_admin))

BODY: tuple[AdminGate, ...] = (BODY_TYPE, BODY_SIZE, BODY_JSON)
READ_GATES: tuple[AdminGate, ...] = (SESSION, ADMIN)
SESSION_READ_GATES: tuple[AdminGate, ...] = (SESSION,)
MUTATION_GATES: tuple[AdminGate, ...] = (ORIGIN, CSRF, *BODY, SESSION, ADMIN)
DELETE_GATES: tuple[AdminGate, ...] = (ORIGIN, CSRF, SESSION, ADMIN)
LOGIN_GATES: tuple[AdminGate, ...] = (ORIGIN, *BODY)
LOGOUT_GATES: tuple[AdminGate, ...] = (ORIGIN, CSRF, SESSION)


def reads_body(gates: tuple[AdminGate, ...]) -> bool:
    """A sequence with the body gates reads and parses the body before the session gate."""
    return BODY_JSON in gates
