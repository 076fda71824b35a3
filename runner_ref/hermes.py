"""The local Hermes client: HTTP and WebSocket, with upstream's loopback authorization.

Rules (hermes-reference.md, "loopback authorization"):
- Discovery is lazy: nothing talks to Hermes until a command needs it, and a failure there fails
  only that command (``hermes_unavailable`` / ``hermes_auth_failed``, 502).
- ``GET /api/status``: ``auth_required: false`` (and the host is literally 127.0.0.1 or [::1],
  which the config guarantees) → *token mode*: read at most 2 MiB of ``GET /``, take
  ``window.__HERMES_SESSION_TOKEN__="…"`` (a JSON string matching ``^[A-Za-z0-9_-]{20,4096}$``),
  validate it with ``GET /api/profiles`` (``X-Hermes-Session-Token``), keep it in memory only;
  WebSockets get ``?token=``.
- ``auth_required: true`` → *account mode*: log in with ``hermesCredentials``
  (``POST /auth/password-login``, session cookie); WebSockets get a single-use ``?ticket=`` from
  ``POST /api/auth/ws-ticket``.
- A 401 refreshes the credentials once and retries the request once.
- The credentials go only to this Hermes; they never appear in an error message.
"""
from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import aiohttp

from . import codes, status, timings
from .bodies import read_capped
from .config import HermesCredentials
from .errors import CommandError

TOKEN_HEADER = "X-Hermes-Session-Token"
NO_HEADERS: dict[str, str] = {}
PAGE_TOKEN_RE = re.compile(r"__HERMES_SESSION_TOKEN__\s*=\s*(\"(?:[^\"\\\r\n]|\\.){0,8192}\")")
TOKEN_RE = re.compile(r"^[A-Za-z0-9_-]{20,4096}$")
#: Keep HTTP connections to Hermes alive for reuse? No: see ``HermesClient._http``.
KEEP_ALIVE = False


def _unavailable() -> CommandError:
    return CommandError.of(codes.HERMES_UNAVAILABLE)


def _auth_failed() -> CommandError:
    return CommandError.of(codes.HERMES_AUTH_FAILED)


def token_from_page(html: str) -> str | None:
    """The session token embedded in Hermes' index page, if any (sans-IO)."""
    m = PAGE_TOKEN_RE.search(html)
    if not m:
        return None
    try:
        token = json.loads(m.group(1))
    except ValueError:
        return None
    return token if isinstance(token, str) and TOKEN_RE.match(token) else None


class HermesClient:
    """HTTP to the local Hermes, authenticated lazily. Implements the team tools'
    ``PluginClient`` protocol (``post_json``)."""

    def __init__(self, base_url: str, credentials: HermesCredentials | None) -> None:
        self.base_url = base_url
        self._credentials = credentials
        self._session: aiohttp.ClientSession | None = None
        self._token: str | None = None
        self._auth_headers: dict[str, str] = {}
        self._account_mode = False
        self._authed = False
        self._generation = 0
        self._auth_lock = asyncio.Lock()

    def _http(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                # No keep-alive reuse: a WebSocket upgrade sent on a connection that just
                # served a request can be cut 5 s later by Hermes' server (uvicorn 0.54 arms the
                # old request's keep-alive timer after handing the socket to the WebSocket).
                connector=aiohttp.TCPConnector(force_close=not KEEP_ALIVE),
                cookie_jar=aiohttp.CookieJar(unsafe=True),
                skip_auto_headers=("User-Agent",),
                timeout=aiohttp.ClientTimeout(total=timings.HERMES_TIMEOUT),
            )
        return self._session

    async def _raw(self, method: str, path: str, *, params: dict[str, str] | None = None,
                   body: Any = None, cap: int = timings.HERMES_BODY_CAP,
                   auth: bool = True) -> tuple[int, dict[str, str], bytes]:
        token = self._token if auth else None
        if token and self._auth_headers.get(TOKEN_HEADER) != token:
            self._auth_headers = {TOKEN_HEADER: token}   # built once per token
        headers = self._auth_headers if token else NO_HEADERS
        try:
            async with self._http().request(method, self.base_url + path, params=params,
                                            json=body, headers=headers,
                                            allow_redirects=False) as resp:
                data = await read_capped(resp, cap)
                if data is None:
                    raise CommandError.of(codes.HERMES_RESPONSE_TOO_LARGE)
                return resp.status, {k.lower(): v for k, v in resp.headers.items()}, data
        except (TimeoutError, aiohttp.ClientError, OSError):
            raise _unavailable() from None

    async def _authenticate(self, stale: int | None = None) -> None:
        """Authenticate, unless done already (or, after a 401, unless someone else already
        refreshed since generation ``stale``)."""
        async with self._auth_lock:
            if self._authed and (stale is None or self._generation != stale):
                return
            self._authed = False
            st, _, data = await self._raw("GET", "/api/status", auth=False, cap=1 << 20)
            try:
                info = json.loads(data) if st == 200 else None
            except (ValueError, RecursionError):
                info = None
            if not isinstance(info, dict):
                raise _unavailable()
            if info.get("auth_required") is True:
                await self._login()
            else:
                await self._read_page_token()
            self._authed = True
            self._generation += 1

    async def _read_page_token(self) -> None:
        st, _, page = await self._raw("GET", "/", auth=False, cap=timings.HERMES_PAGE_CAP)
        token = token_from_page(page.decode("utf-8", "replace")) if st == 200 else None
        if token is None:
            raise _auth_failed()
        self._token = token
        status.add_secret(token)
        st, _, _ = await self._raw("GET", "/api/profiles")
        if st != 200:
            self._token = None
            raise _auth_failed()
        self._account_mode = False

    async def _login(self) -> None:
        if self._credentials is None:
            raise CommandError.of(codes.HERMES_AUTH_FAILED,
                                  "local Hermes requires hermesCredentials")
        self._token = None
        st, _, _ = await self._raw("POST", "/auth/password-login", auth=False, body={
            "provider": "basic", "username": self._credentials.username,
            "password": self._credentials.password})
        if st != 200:
            raise _auth_failed()
        self._account_mode = True

    async def request(self, method: str, path: str, params: dict[str, str] | None = None,
                      body: Any = None) -> tuple[int, dict[str, str], bytes]:
        """An authenticated request; one credential refresh and retry after a 401."""
        if not self._authed:
            await self._authenticate()
        used = self._generation
        st, headers, data = await self._raw(method, path, params=params, body=body)
        if st == 401:
            await self._authenticate(stale=used)
            st, headers, data = await self._raw(method, path, params=params, body=body)
        return st, headers, data

    async def post_json(self, path: str, body: dict[str, Any]) -> tuple[int, Any]:
        st, _, data = await self.request("POST", path, body=body)
        return st, _json_or_none(data)

    async def ws_connect(self) -> aiohttp.ClientWebSocketResponse:
        """Open ``/api/ws`` with ``?token=`` (token mode) or ``?ticket=`` (account mode)."""
        for attempt in range(2):
            if not self._authed:
                await self._authenticate()
            used = self._generation
            if self._account_mode:
                st, _, data = await self._raw("POST", "/api/auth/ws-ticket", body={})
                ticket = (_json_or_none(data) or {}).get("ticket") if st == 200 else None
                if not isinstance(ticket, str):
                    if attempt == 0:
                        self._authed = False
                        continue
                    raise _auth_failed()
                status.add_secret(ticket)
                params = {"ticket": ticket}
            else:
                params = {"token": self._token or ""}
            ws_url = self.base_url.replace("http", "ws", 1) + "/api/ws"
            try:
                return await self._http().ws_connect(
                    ws_url, params=params, autoping=True, heartbeat=None,
                    max_msg_size=timings.RESPONSE_CAP,
                    timeout=aiohttp.ClientWSTimeout(ws_close=timings.INTERRUPT_WAIT))
            except aiohttp.WSServerHandshakeError as exc:
                if exc.status in (401, 403) and attempt == 0:
                    await self._authenticate(stale=used)
                    continue
                raise CommandError.of(codes.HERMES_UNAVAILABLE, "Hermes refused the gateway") from None
            except (TimeoutError, aiohttp.ClientError, OSError):
                raise _unavailable() from None
        raise _auth_failed()

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


def _json_or_none(data: bytes) -> Any:
    try:
        return json.loads(data) if data else None
    except (ValueError, RecursionError):
        return None
