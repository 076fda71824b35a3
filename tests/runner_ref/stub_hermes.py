"""A minimal loopback Hermes for ledger tests: token mode, counts every authenticated GET, and
can hold requests (``hold``) so a test can kill the runner mid-command."""
from __future__ import annotations

import asyncio
import json
import secrets
from collections import Counter

from aiohttp import web


class StubHermes:
    def __init__(self) -> None:
        self.token = secrets.token_urlsafe(24)
        self.tokens = [self.token]  # every token it ever had (the secret scan checks them all)
        self.hits: Counter[str] = Counter()
        self.hold = False
        self.body_size: int | None = None  # GET /api/config answers exactly this many bytes
        self.chunked = False               # ... without a Content-Length (chunked)
        self.arrived = asyncio.Event()
        self._release = asyncio.Event()
        self.total = 0                      # counted requests so far (what ``hits`` sums)
        self._hold_at: int | None = None    # hold just the request with this ordinal …
        self.held = asyncio.Event()         # … set once it is held
        self._unhold = asyncio.Event()
        self._runner: web.AppRunner | None = None
        self.url = ""

    async def __aenter__(self) -> StubHermes:
        app = web.Application()
        app.router.add_get("/", self._index)
        app.router.add_get("/api/status", self._status)
        app.router.add_get("/api/{tail:.*}", self._api)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = self._runner.addresses[0][1]  # the bound (host, port): public AppRunner API
        self.url = f"http://127.0.0.1:{port}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._release.set()
        self._unhold.set()
        assert self._runner is not None
        await self._runner.cleanup()

    def rotate(self) -> None:
        """A Hermes restart: a new session token (the runner must refresh once after a 401)."""
        self.token = secrets.token_urlsafe(24)
        self.tokens.append(self.token)

    def release(self) -> None:
        self._release.set()

    def hold_request(self, ordinal: int) -> None:
        """Hold the ``ordinal``-th counted request (1 = the next one) until :meth:`unhold`;
        ``held`` is set once it is held: a pause point for a kill -9 mid-command."""
        self._hold_at = self.total + ordinal
        self.held = asyncio.Event()
        self._unhold = asyncio.Event()

    def unhold(self) -> None:
        self._hold_at = None
        self._unhold.set()

    async def _index(self, request: web.Request) -> web.Response:
        return web.Response(text=f'<script>window.__HERMES_SESSION_TOKEN__="{self.token}";</script>',
                            content_type="text/html")

    async def _status(self, request: web.Request) -> web.Response:
        return web.json_response({"version": "0.19.0", "auth_required": False})

    async def _api(self, request: web.Request) -> web.StreamResponse:
        if request.headers.get("X-Hermes-Session-Token") != self.token:
            return web.json_response({"detail": "Unauthorized"}, status=401)
        key = request.path + ("?" + request.query.get("n", "") if "n" in request.query else "")
        if request.path != "/api/profiles" or "n" in request.query:
            self.hits[key] += 1
            self.total += 1
            self.arrived.set()
            if self.total == self._hold_at:
                unhold = self._unhold
                self.held.set()
                await unhold.wait()
            if self.hold:
                await self._release.wait()
        if request.path == "/api/config" and self.body_size is not None:
            if not self.chunked:
                return web.Response(body=b"x" * self.body_size, content_type="application/json")
            resp = web.StreamResponse()
            resp.enable_chunked_encoding()
            await resp.prepare(request)
            left = self.body_size
            while left > 0:
                n = min(left, 1 << 20)
                await resp.write(b"x" * n)
                left -= n
            await resp.write_eof()
            return resp
        return web.json_response({"path": request.path, "query": dict(request.query),
                                  "profiles": [{"name": "default"}]},
                                 dumps=lambda o: json.dumps(o))
