"""A browser-like admin client for the admin API tests (cookie jar, same Origin, the CSRF header
from the login), what it saw (scanned for secrets), and the tests' passwords and paths."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from fake_server import ControlPlane

ADMIN_PW = "admin-password-for-tests-0123"
ALICE_PW = "alice-password-for-tests-0123"
RUNNERS = "/api/app/admin/runners"
UUID_ZERO = "00000000-0000-0000-0000-000000000000"
SUMMARY_KEYS = {"id", "name", "sourceNodeId", "allowedProfiles", "enabled", "createdAt", "features", "online"}


@dataclass
class Seen:
    """Every response body and header block an admin client received (scanned for secrets)."""

    bodies: list[str] = field(default_factory=list)

    def scan(self, *secrets: str) -> list[str]:
        return [s for s in secrets for b in self.bodies if s in b]


class Admin:
    """A browser-like admin client: cookie jar, same Origin, CSRF header from the login."""

    def __init__(self, cp: ControlPlane, http: aiohttp.ClientSession, seen: Seen) -> None:
        self.cp, self.http, self.seen = cp, http, seen
        self.csrf = ""

    async def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        origin: str | None = "same",
        csrf: str | None = "same",
        raw: bytes | None = None,
        content_type: str = "application/json",
    ) -> tuple[int, Any, aiohttp.ClientResponse]:
        headers: dict[str, str] = {}
        if origin == "same":
            headers["Origin"] = self.cp.url
        elif origin is not None:
            headers["Origin"] = origin
        if csrf == "same":
            headers["X-CSRF-Token"] = self.csrf
        elif csrf is not None:
            headers["X-CSRF-Token"] = csrf
        data: bytes | None = raw
        if data is None and body is not None:
            data = json.dumps(body).encode()
        if data is not None:
            headers["Content-Type"] = content_type
        async with self.http.request(method, self.cp.url + path, data=data, headers=headers) as resp:
            text = await resp.text()
            self.seen.bodies.append(text)
            self.seen.bodies.append("\n".join(f"{k}: {v}" for k, v in resp.headers.items()))
            assert resp.headers.get("Cache-Control") == "no-store", (method, path)
            payload = json.loads(text) if text else None
            if resp.status >= 400:
                assert isinstance(payload, dict) and set(payload) == {"error", "code"}, payload
            return resp.status, payload, resp

    async def login(self, user: str = "admin", password: str = ADMIN_PW) -> Any:
        status, body, _ = await self.call(
            "POST", "/api/app/login", {"username": user, "password": password}, csrf=None
        )
        assert status == 200, body
        self.csrf = body["csrfToken"]
        return body

    async def register(self, name: str, source: str | None = None, profiles: Any = None) -> tuple[int, Any]:
        body: dict[str, Any] = {"name": name, "allowedProfiles": profiles or ["default"]}
        if source is not None:
            body["sourceNodeId"] = source
        status, payload, _ = await self.call("POST", RUNNERS, body)
        return status, payload

    async def runners(self) -> Any:
        status, body, _ = await self.call("GET", RUNNERS)
        assert status == 200, body
        return body


async def new_admin(cp: ControlPlane, seen: Seen) -> tuple[Admin, aiohttp.ClientSession]:
    session = aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True))
    return Admin(cp, session, seen), session
