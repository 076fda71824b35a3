"""Admin API (protocol §7) and the admin web page of the simulated control plane.

Rules (everything that decides an admin request lives at the top of this file):
- Every route under ``/api/app/`` answers failures as ``{"error": <message>, "code": <code>}``,
  never an HTML page and never a 500 with a traceback. Every response is ``no-store``.
- A session is a random cookie (``HttpOnly; SameSite=Strict; Path=/``) mapped to an account and a
  CSRF token held in memory. It expires ``session_ttl`` seconds after login on the control plane's
  clock; an expired session answers **401 ``session_expired``**, a missing or unknown one
  **401 ``unauthenticated``**.
- Every mutation passes ``MUTATION_GATES`` in order: exact ``Origin`` (the page's own origin),
  a session, an admin account, a ``X-CSRF-Token`` header equal to the session's token (double
  submit: the token is also in a readable cookie). Reads pass ``READ_GATES``.
- Bodies are strict JSON objects (unknown keys, wrong types, out-of-range sizes →
  **400 ``invalid_workspace_request``**; unparsable → **400 ``invalid_json``**).
- The runner token appears only in the 201 registration response; no list, error or log line
  ever holds a token, its hash or a password.
- Registered profiles must be inside the admin account's allowed profiles and, when the source
  restricts them, the source's (**403 ``runner_profile_forbidden``**, our choice: the upstream's
  profile-validator codes are not determined).
- Disable keeps the record (``enabled:false``) and disconnects the runner at once through
  ``cp.disable_runner`` (the hub's disconnect).
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import re
import secrets
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aiohttp import web

from .store import StoreError
from .timings import Timings

if TYPE_CHECKING:
    from .admin_deps import AdminDeps as ControlPlane

# -- limits and names --------------------------------------------------------------------------

SESSION_COOKIE = "yaoyao_session"
CSRF_COOKIE = "yaoyao_csrf"
CSRF_HEADER = "X-CSRF-Token"
DEFAULT_SESSION_TTL = Timings.admin_session_ttl
MAX_BODY_BYTES = 64 * 1024
NAME_MAX = 100
PROFILES_MAX = 256
PROFILE_MAX = 100
LOGIN_FIELD_MAX = 4096
DEFAULT_HERMES_UPSTREAM = "http://127.0.0.1:9119"
STATIC_DIR = Path(__file__).with_name("static")
ADMIN_LOG_MAX = 10_000
_log = logging.getLogger(__name__)
_UUID_RE = re.compile(r"^[0-9a-f-]{36}$")
_PROFILE_BAD = re.compile(r"[/\\\x00-\x1f]")

# -- gates as data: (check name, HTTP status, code, message), applied in order -------------------

Gate = tuple[str, int, str, str]
READ_GATES: tuple[Gate, ...] = (
    ("session", 401, "unauthenticated", "sign in first"),
    ("admin", 403, "admin_required", "administrator account required"),
)
MUTATION_GATES: tuple[Gate, ...] = (
    ("origin", 403, "invalid_origin", "cross-origin request refused"),
    ("session", 401, "unauthenticated", "sign in first"),
    ("admin", 403, "admin_required", "administrator account required"),
    ("csrf", 403, "invalid_csrf", "missing or wrong CSRF token"),
)
# login has no session yet: only the Origin gate applies; logout needs a session and CSRF only.
LOGIN_GATES: tuple[Gate, ...] = (MUTATION_GATES[0],)
LOGOUT_GATES: tuple[Gate, ...] = (MUTATION_GATES[0], MUTATION_GATES[1], MUTATION_GATES[3])
SESSION_READ_GATES: tuple[Gate, ...] = (READ_GATES[0],)
EXPIRED: tuple[int, str, str] = (401, "session_expired", "session expired, sign in again")

# -- strict body schemas: key → (required, validator) ------------------------------------------


class AdminError(Exception):
    """A refusal that becomes ``{"error","code"}`` with ``status``."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


def _bad(message: str) -> AdminError:
    return AdminError(400, "invalid_workspace_request", message)


def _text(value: Any, *, lo: int, hi: int, what: str, trim: bool = True) -> str:
    if not isinstance(value, str):
        raise _bad(f"{what} must be a string")
    text = value.strip() if trim else value
    if not lo <= len(text) <= hi:
        raise _bad(f"{what} must be {lo}–{hi} characters")
    return text


def _profiles(value: Any) -> list[str]:
    if not isinstance(value, list) or not 1 <= len(value) <= PROFILES_MAX:
        raise _bad(f"allowedProfiles must be a list of 1–{PROFILES_MAX} profiles")
    out: list[str] = []
    for item in value:
        name = _text(item, lo=1, hi=PROFILE_MAX, what="profile")
        if _PROFILE_BAD.search(name):
            raise _bad("profile names cannot contain '/', '\\' or control characters")
        if name not in out:
            out.append(name)
    return out


Validator = Callable[[Any], Any]
REGISTRATION_SCHEMA: dict[str, tuple[bool, Validator]] = {
    "name": (True, lambda v: _text(v, lo=1, hi=NAME_MAX, what="name")),
    "sourceNodeId": (False, lambda v: _text(v, lo=1, hi=NAME_MAX, what="sourceNodeId")),
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

    cp: ControlPlane
    session_ttl: float = DEFAULT_SESSION_TTL
    sessions: dict[str, AdminSession] = field(default_factory=dict)
    log: deque[AdminExchange] = field(default_factory=lambda: deque(maxlen=ADMIN_LOG_MAX))

    def now(self) -> float:
        return self.cp.clock.now()

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

_NO_STORE = {"Cache-Control": "no-store"}


def _error(status: int, code: str, message: str) -> web.Response:
    return web.json_response({"error": message, "code": code}, status=status, headers=_NO_STORE)


def _ok(payload: Any, status: int = 200) -> web.Response:
    return web.json_response(payload, status=status, headers=_NO_STORE)


async def _read_json(request: web.Request) -> Any:
    ctype = request.content_type
    if ctype != "application/json":
        raise AdminError(415, "invalid_content_type", "body must be application/json")
    if request.content_length is not None and request.content_length > MAX_BODY_BYTES:
        raise AdminError(413, "payload_too_large", "body too large")
    raw = await request.content.read(MAX_BODY_BYTES + 1)
    if len(raw) > MAX_BODY_BYTES:
        raise AdminError(413, "payload_too_large", "body too large")
    try:
        return json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise AdminError(400, "invalid_json", "body is not valid JSON") from None


def _own_origins(request: web.Request, cp: ControlPlane) -> set[str]:
    return {f"{request.scheme}://{request.host}", cp.url}


@dataclass
class Caller:
    """Who is asking, once the gates passed."""

    session_id: str
    session: AdminSession
    account: Any


async def _gate(request: web.Request, gates: tuple[Gate, ...]) -> Caller | None:
    state = request.app[ADMIN_STATE]
    caller: Caller | None = None
    for name, status, code, message in gates:
        if name == "origin":
            origin = request.headers.get("Origin")
            if origin is None or origin not in _own_origins(request, state.cp):
                raise AdminError(status, code, message)
        elif name == "session":
            sid = request.cookies.get(SESSION_COOKIE, "")
            sess = state.sessions.get(sid) if sid else None
            if sess is None:
                raise AdminError(status, code, message)
            if sess.expires_at <= state.now():
                raise AdminError(*EXPIRED)
            account = await state.cp.store.get_account(sess.account)
            if account is None or not account.active:
                state.sessions.pop(sid, None)
                raise AdminError(status, code, message)
            caller = Caller(sid, sess, account)
        elif name == "admin":
            if caller is None or not caller.account.is_admin:
                raise AdminError(status, code, message)
        elif name == "csrf":
            sent = request.headers.get(CSRF_HEADER, "")
            if caller is None or not sent or not hmac.compare_digest(
                sent.encode("utf-8", "replace"), caller.session.csrf.encode("utf-8")
            ):
                raise AdminError(status, code, message)
        else:  # pragma: no cover - a typo in the tables above
            raise RuntimeError(f"unknown gate {name}")
    return caller


def _require(caller: Caller | None) -> Caller:
    assert caller is not None, "gate table without a session gate"
    return caller


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
    status, code, message = 500, "internal_error", "internal error"
    try:
        return await handler(request)
    except (AdminError, StoreError) as exc:
        status, code, message = exc.status, exc.code, exc.message
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        codes = {404: "not_found", 405: "method_not_allowed", 413: "payload_too_large"}
        status, code, message = exc.status, codes.get(exc.status, "http_error"), exc.reason
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
    await _gate(request, LOGIN_GATES)
    state = request.app[ADMIN_STATE]
    body = validate(await _read_json(request), LOGIN_SCHEMA)
    account = await state.cp.store.check_password(body["username"], body["password"])
    if account is None or not account.active:
        raise AdminError(401, "invalid_credentials", "wrong user name or password")
    old = request.cookies.get(SESSION_COOKIE)
    if old:
        state.sessions.pop(old, None)
    # forget sessions long expired (an expired one still answers session_expired for a while)
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
    caller = _require(await _gate(request, LOGOUT_GATES))
    request.app[ADMIN_STATE].sessions.pop(caller.session_id, None)
    response = _ok({"ok": True})
    response.del_cookie(SESSION_COOKIE, path="/")
    response.del_cookie(CSRF_COOKIE, path="/")
    return response


async def session_info(request: web.Request) -> web.Response:
    caller = _require(await _gate(request, SESSION_READ_GATES))
    state = request.app[ADMIN_STATE]
    return _ok(
        {
            "user": _user(caller.account),
            "csrfToken": caller.session.csrf,
            "expiresIn": max(0.0, caller.session.expires_at - state.now()),
        }
    )


async def list_runners(request: web.Request) -> web.Response:
    await _gate(request, READ_GATES)
    cp = request.app[ADMIN_STATE].cp
    runners = [r.summary(online=cp.is_online(r.id)) for r in await cp.store.list_runners()]
    sources = [
        {"id": s.id, "name": s.name}
        for s in await cp.store.list_sources()
        if s.id == "local" or not s.paired
    ]
    return _ok(
        {
            "protocol": 1,
            "hermesUpstream": DEFAULT_HERMES_UPSTREAM,
            "fixedDesktops": [],
            "bundleAvailable": False,
            "runners": runners,
            "sources": sources,
        }
    )


async def runner_bundle(request: web.Request) -> web.Response:
    await _gate(request, READ_GATES)
    raise AdminError(404, "runner_bundle_missing", "runner bundle not built")


_REGISTER_LOCK: web.AppKey[asyncio.Lock] = web.AppKey("admin_register_lock", asyncio.Lock)


async def register_runner(request: web.Request) -> web.Response:
    caller = _require(await _gate(request, MUTATION_GATES))
    cp = request.app[ADMIN_STATE].cp
    body = validate(await _read_json(request), REGISTRATION_SCHEMA)
    source_id = body.get("sourceNodeId", "local")
    profiles: list[str] = body["allowedProfiles"]
    source = await cp.store.get_source(source_id)
    if source is None:
        raise AdminError(404, "workspace_not_found", "source not found")
    allowed = set(caller.account.allowed_profiles)
    if source.allowed_profiles is not None:
        allowed &= set(source.allowed_profiles)
    outside = [p for p in profiles if p not in allowed]
    if outside:
        raise AdminError(
            403, "runner_profile_forbidden", "profile not allowed for this account or source"
        )
    async with request.app[_REGISTER_LOCK]:
        record, token = await cp.store.create_runner(
            name=body["name"],
            source_node_id=source_id,
            allowed_profiles=profiles,
            owner=caller.account.name,
        )
    return _ok({"runner": record.summary(online=False), "token": token}, status=201)


async def delete_runner(request: web.Request) -> web.Response:
    await _gate(request, MUTATION_GATES)
    cp = request.app[ADMIN_STATE].cp
    runner_id = request.match_info["runner_id"]
    if not _UUID_RE.match(runner_id) or await cp.store.get_runner(runner_id) is None:
        raise AdminError(404, "workspace_not_found", "runner not found")
    await cp.disable_runner(runner_id)
    return _ok({"ok": True})


# -- the page ------------------------------------------------------------------------------------

_PAGE_HEADERS = {
    "Cache-Control": "no-store",
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; form-action 'none'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}
_STATIC_TYPES = {".html": "text/html", ".css": "text/css", ".js": "text/javascript"}


async def admin_page(request: web.Request) -> web.StreamResponse:
    return _static_file("index.html")


async def admin_static(request: web.Request) -> web.StreamResponse:
    name = request.match_info["name"]
    if name not in {"app.css", "app.js"}:
        raise web.HTTPNotFound()
    return _static_file(name)


def _static_file(name: str) -> web.Response:
    path = STATIC_DIR / name
    return web.Response(
        body=path.read_bytes(),
        content_type=_STATIC_TYPES[path.suffix],
        charset="utf-8",
        headers=_PAGE_HEADERS,
    )


async def admin_redirect(request: web.Request) -> web.StreamResponse:
    raise web.HTTPFound("/admin/")


def setup_admin(app: web.Application, cp: ControlPlane) -> None:
    """Mount the admin API and page on ``app``."""
    app[ADMIN_STATE] = AdminState(cp=cp, session_ttl=cp.timings.admin_session_ttl)
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
