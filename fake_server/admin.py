"""Admin API (protocol §7) and the admin web page of the simulated control plane.

Rules (everything that decides an admin request lives here and in ``admin_gates`` (the gates
as rows), ``admin_schemas`` (strict bodies, the profile validator); ``admin_page`` serves the
page; ``admin_deps.AdminDeps`` is all this package gets from the control plane):
- Every route under ``/api/app/`` answers failures as ``{"error": <message>, "code": <code>}``
  (``codes.error_body``), never an HTML page and never a 500 with a traceback. Every response
  is ``no-store``.
- A session is a random cookie (``HttpOnly; SameSite=Strict; Path=/``) mapped to an account and
  a CSRF token held in memory. It expires ``session_ttl`` seconds after login on the control
  plane's clock; an unknown or expired session answers **401 ``authentication_required``**, as
  upstream (which does not tell the two apart).
- Gates run as rows (``admin_gates``): mutations Origin → CSRF → body → session → admin, as
  upstream's ``app.ts`` (Origin and CSRF before the body parser and auth).
- Bodies: unparsable JSON → **400 ``invalid_json_body``**, over ``MAX_BODY_BYTES`` → **413
  ``invalid_json_body``** (upstream's body parser; its limit is 2 MB). Then strict schemas:
  unknown keys, wrong types, out-of-range sizes → **400 ``invalid_workspace_request``**.
- Registration: ``sourceNodeId`` is taken as sent (no trim). Profile names that are blank or
  hold ``/``, ``\\`` or control characters → **400 ``invalid_assigned_profiles``** (⚑ upstream's
  ``validateAssignedProfiles`` was not traced in detail; its code is this one). Admins may assign
  any profile, as upstream. ⚑ Harness extra, off by default: ``AdminState.restrict_profiles``
  refuses profiles outside the admin account's or the source's list (403
  ``runner_profile_forbidden``).
- The list answers ``hermesUpstream: ""`` and ``fixedDesktops: false`` (upstream's defaults).
- The runner token appears only in the 201 registration response; no list, error or log line
  ever holds a token, its hash or a password.
- Disable keeps the record (``enabled:false``) and disconnects the runner at once through
  ``deps.disable_runner`` (the hub's disconnect).
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import secrets
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from . import codes
from .admin_deps import AdminDeps
from .admin_gates import (
    DELETE_GATES,
    LOGIN_GATES,
    LOGOUT_GATES,
    MUTATION_GATES,
    READ_GATES,
    SESSION_READ_GATES,
    AdminAsk,
    AdminGate,
    AdminView,
    reads_body,
)
from .admin_page import admin_page, admin_redirect, admin_static
from .admin_schemas import LOGIN_SCHEMA, REGISTRATION_SCHEMA, AdminError, refused, validate
from .codes import NO_STORE, error_body
from .gates import first_refusal
from .records import StoreError
from .timings import Timings

# -- limits and names --------------------------------------------------------------------------

SESSION_COOKIE = "yaoyao_session"
CSRF_COOKIE = "yaoyao_csrf"
CSRF_HEADER = "X-CSRF-Token"
DEFAULT_SESSION_TTL = Timings.admin_session_ttl
MAX_BODY_BYTES = 2 * 1024 * 1024
ADMIN_LOG_MAX = 10_000
_log = logging.getLogger(__name__)
_UUID_RE = re.compile(r"^[0-9a-f-]{36}$")

# -- sessions ------------------------------------------------------------------------------------


@dataclass
class AdminSession:
    """One signed-in browser: the account, its CSRF token and when it expires."""

    account: str
    csrf: str
    expires_at: float

    def __repr__(self) -> str:  # keep the CSRF token out of logs
        return f"AdminSession(account={self.account!r}, expires_at={self.expires_at})"


@dataclass(frozen=True)
class AdminExchange:
    """One admin request as the server saw it (no bodies, no cookie values: nothing secret)."""

    method: str
    path: str
    origin: str | None
    had_session_cookie: bool
    had_csrf_header: bool
    status: int
    code: str | None


@dataclass
class AdminState:
    """Admin state of one app: sessions (in memory), the exchange log, settings tests may change."""

    deps: AdminDeps
    session_ttl: float = DEFAULT_SESSION_TTL
    sessions: dict[str, AdminSession] = field(default_factory=dict)
    log: deque[AdminExchange] = field(default_factory=lambda: deque(maxlen=ADMIN_LOG_MAX))
    restrict_profiles: bool = False  # ⚑ harness extra: registered profiles inside the admin's

    def now(self) -> float:
        return self.deps.clock.now()

    def expire_sessions(self) -> None:
        """Make every current session expired (a test hook: no waiting on time)."""
        for sess in self.sessions.values():
            sess.expires_at = min(sess.expires_at, self.now() - 1)


ADMIN_STATE: web.AppKey[AdminState] = web.AppKey("admin_state", AdminState)
_CODE: web.RequestKey[str] = web.RequestKey("admin_code", str)


def admin_state(app: web.Application) -> AdminState:
    """The admin state mounted on ``app`` by ``setup_admin``."""
    return app[ADMIN_STATE]


# -- HTTP plumbing -------------------------------------------------------------------------------

#: aiohttp's own answers under ``/api/app/``, as our codes (413: ``invalid_json_body``'s 2nd status).
_HTTP_CODES: dict[int, codes.Code] = {404: codes.NOT_FOUND, 405: codes.METHOD_NOT_ALLOWED,
                                      413: codes.INVALID_JSON_BODY}


def _error(status: int, code: str, message: str) -> web.Response:
    return web.json_response(error_body(code, message), status=status, headers=NO_STORE)


def _ok(payload: Any, status: int = 200) -> web.Response:
    return web.json_response(payload, status=status, headers=NO_STORE)


async def _read_body(request: web.Request) -> tuple[Any, str | None]:
    """The parsed JSON body, or the name of the body gate that refuses it."""
    if request.content_type != "application/json":
        return None, "type"
    if request.content_length is not None and request.content_length > MAX_BODY_BYTES:
        return None, "size"
    raw = await request.content.read(MAX_BODY_BYTES + 1)
    if len(raw) > MAX_BODY_BYTES:
        return None, "size"
    try:
        return json.loads(raw.decode("utf-8")), None
    except (UnicodeDecodeError, ValueError):
        return None, "json"


def _own_origins(request: web.Request, deps: AdminDeps) -> frozenset[str]:
    return frozenset({f"{request.scheme}://{request.host}", deps.own_origin})


@dataclass
class Caller:
    """Who is asking, once the gates passed, and the body they sent (if the route has one)."""

    session_id: str
    session: AdminSession | None
    account: Any
    body: Any = None


async def _gate(request: web.Request, gates: tuple[AdminGate, ...]) -> Caller:
    """Run ``gates`` (rows of ``admin_gates``); raise the first refusal as an ``AdminError``."""
    state = request.app[ADMIN_STATE]
    body, fault = await _read_body(request) if reads_body(gates) else (None, None)
    sid = request.cookies.get(SESSION_COOKIE, "")
    sess = state.sessions.get(sid) if sid else None
    if sess is not None and sess.expires_at <= state.now():
        sess = None
    account = await state.deps.store.get_account(sess.account) if sess is not None else None
    if sess is not None and (account is None or not account.active):
        state.sessions.pop(sid, None)
        sess = account = None
    ask = AdminAsk(
        origin=request.headers.get("Origin"),
        own_origins=_own_origins(request, state.deps),
        csrf_header=request.headers.get(CSRF_HEADER),
        csrf_cookie=request.cookies.get(CSRF_COOKIE),
        body_fault=fault,
    )
    view = AdminView(
        issued_csrf=frozenset(s.csrf for s in state.sessions.values()),
        signed_in=account is not None,
        is_admin=bool(account is not None and account.is_admin),
    )
    refusal = first_refusal(gates, ask, view)
    if refusal is not None:
        raise AdminError(refusal.status, refusal.code, refusal.message)
    return Caller(sid, sess, account, body)


def _signed_in(caller: Caller) -> tuple[AdminSession, Any]:
    """The session and account of a caller that passed a session gate."""
    if caller.session is None or caller.account is None:  # a route table without SESSION
        raise refused(codes.AUTHENTICATION_REQUIRED)
    return caller.session, caller.account


@web.middleware
async def admin_errors(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    """Turn every failure under ``/api/app/`` into ``{"error","code"}`` (no HTML, no traceback)."""
    if not request.path.startswith("/api/app/"):
        return await handler(request)
    response = await _answer_json(request, handler)
    code = request.get(_CODE)
    request.app[ADMIN_STATE].log.append(
        AdminExchange(
            method=request.method,
            path=request.path,
            origin=request.headers.get("Origin"),
            had_session_cookie=SESSION_COOKIE in request.cookies,
            had_csrf_header=CSRF_HEADER in request.headers,
            status=response.status,
            code=code,
        )
    )
    return response


async def _answer_json(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    status, code, message = codes.INTERNAL_ERROR.status, codes.INTERNAL_ERROR.code, codes.INTERNAL_ERROR.message
    try:
        return await handler(request)
    except (AdminError, StoreError) as exc:
        status, code, message = exc.status, exc.code, exc.message
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        row = _HTTP_CODES.get(exc.status, codes.BAD_REQUEST if exc.status < 500 else codes.INTERNAL_ERROR)
        status, code, message = exc.status, row.code, exc.reason
    except Exception as exc:  # never a traceback on the wire; the type only in the log
        _log.error("admin %s %s failed: %s", request.method, request.path, type(exc).__name__)
    request[_CODE] = code
    return _error(status, code, message)


def _set_session_cookies(response: web.Response, sid: str, csrf: str, max_age: int) -> None:
    response.set_cookie(
        SESSION_COOKIE, sid, httponly=True, samesite="Strict", path="/", max_age=max_age
    )
    response.set_cookie(CSRF_COOKIE, csrf, httponly=False, samesite="Strict", path="/", max_age=max_age)


def _user(account: Any) -> dict[str, Any]:
    return {
        "name": account.name,
        "isAdmin": bool(account.is_admin),
        "allowedProfiles": list(account.allowed_profiles),
    }


# -- handlers ------------------------------------------------------------------------------------


async def login(request: web.Request) -> web.Response:
    caller = await _gate(request, LOGIN_GATES)
    state = request.app[ADMIN_STATE]
    body = validate(caller.body, LOGIN_SCHEMA)
    account = await state.deps.store.check_password(body["username"], body["password"])
    if account is None or not account.active:
        raise refused(codes.INVALID_CREDENTIALS)
    old = request.cookies.get(SESSION_COOKIE)
    if old:
        state.sessions.pop(old, None)
    # forget sessions long expired (their CSRF tokens go with them)
    horizon = state.now() - state.session_ttl
    for sid in [k for k, v in state.sessions.items() if v.expires_at < horizon]:
        del state.sessions[sid]
    sid, csrf = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
    sess = AdminSession(account.name, csrf, state.now() + state.session_ttl)
    state.sessions[sid] = sess
    response = _ok({"ok": True, "user": _user(account), "csrfToken": csrf, "expiresIn": state.session_ttl})
    _set_session_cookies(response, sid, csrf, max(1, int(state.session_ttl)))
    return response


async def logout(request: web.Request) -> web.Response:
    caller = await _gate(request, LOGOUT_GATES)
    request.app[ADMIN_STATE].sessions.pop(caller.session_id, None)
    response = _ok({"ok": True})
    response.del_cookie(SESSION_COOKIE, path="/")
    response.del_cookie(CSRF_COOKIE, path="/")
    return response


async def session_info(request: web.Request) -> web.Response:
    session, account = _signed_in(await _gate(request, SESSION_READ_GATES))
    state = request.app[ADMIN_STATE]
    return _ok(
        {
            "user": _user(account),
            "csrfToken": session.csrf,
            "expiresIn": max(0.0, session.expires_at - state.now()),
        }
    )


async def list_runners(request: web.Request) -> web.Response:
    await _gate(request, READ_GATES)
    deps = request.app[ADMIN_STATE].deps
    runners = [r.summary(online=deps.is_online(r.id), features=deps.features(r.id)) for r in await deps.store.list_runners()]
    sources = [
        {"id": s.id, "name": s.name}
        for s in await deps.store.list_sources()
        if s.id == "local" or not s.paired
    ]
    return _ok(
        {
            "protocol": 1,
            "hermesUpstream": "",
            "fixedDesktops": False,
            "bundleAvailable": False,
            "runners": runners,
            "sources": sources,
        }
    )


async def runner_bundle(request: web.Request) -> web.Response:
    await _gate(request, READ_GATES)
    raise refused(codes.RUNNER_BUNDLE_MISSING)


_REGISTER_LOCK: web.AppKey[asyncio.Lock] = web.AppKey("admin_register_lock", asyncio.Lock)


async def register_runner(request: web.Request) -> web.Response:
    caller = await _gate(request, MUTATION_GATES)
    _, account = _signed_in(caller)
    state = request.app[ADMIN_STATE]
    store = state.deps.store
    body = validate(caller.body, REGISTRATION_SCHEMA)
    source_id = body.get("sourceNodeId", "local")
    profiles: list[str] = body["allowedProfiles"]
    source = await store.get_source(source_id)
    if source is None:
        raise refused(codes.WORKSPACE_NOT_FOUND, "source not found")
    if state.restrict_profiles:  # ⚑ harness extra, off by default (upstream has no such check)
        allowed = set(account.allowed_profiles)
        if source.allowed_profiles is not None:
            allowed &= set(source.allowed_profiles)
        if any(p not in allowed for p in profiles):
            raise refused(codes.RUNNER_PROFILE_FORBIDDEN)
    async with request.app[_REGISTER_LOCK]:
        record, token = await store.create_runner(
            name=body["name"],
            source_node_id=source_id,
            allowed_profiles=profiles,
            owner=account.name,
        )
    return _ok({"runner": record.summary(online=False), "token": token}, status=201)


async def delete_runner(request: web.Request) -> web.Response:
    await _gate(request, DELETE_GATES)
    deps = request.app[ADMIN_STATE].deps
    runner_id = request.match_info["runner_id"]
    if not _UUID_RE.match(runner_id) or await deps.store.get_runner(runner_id) is None:
        raise refused(codes.WORKSPACE_NOT_FOUND, "runner not found")
    await deps.disable_runner(runner_id)
    return _ok({"ok": True})


def setup_admin(app: web.Application, deps: AdminDeps) -> None:
    """Mount the admin API and page on ``app``."""
    app[ADMIN_STATE] = AdminState(deps=deps, session_ttl=deps.timings.admin_session_ttl)
    app[_REGISTER_LOCK] = asyncio.Lock()
    app.middlewares.append(admin_errors)
    r = app.router
    r.add_post("/api/app/login", login)
    r.add_post("/api/app/logout", logout)
    r.add_get("/api/app/session", session_info)
    r.add_get("/api/app/admin/runners", list_runners)
    r.add_post("/api/app/admin/runners", register_runner)
    r.add_get("/api/app/admin/runners/bundle", runner_bundle)
    r.add_delete("/api/app/admin/runners/{runner_id}", delete_runner)
    r.add_get("/admin", admin_redirect)
    r.add_get("/admin/", admin_page)
    r.add_get("/admin/static/{name}", admin_static)
