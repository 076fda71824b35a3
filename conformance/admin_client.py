"""``AdminClient``: the control plane's admin API as an administrator's browser uses it.

Login (exact ``Origin``), the session cookie and the CSRF token (double submit:
``X-CSRF-Token``), register, list, disable, and the ``runner.json`` the page builds after a
registration (protocol 1 §1.1 fields, in the page's order). Any non-2xx answer raises
:class:`AdminError` with the status and code (never a body that could hold a secret).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import aiohttp


class AdminError(Exception):
    def __init__(self, method: str, path: str, status: int, code: str | None) -> None:
        super().__init__(f"{method} {path} answered {status} {code or ''}".rstrip())
        self.status = status
        self.code = code


@dataclass(frozen=True)
class Registered:
    """A 201 registration: the runner summary and the token (shown once)."""

    runner: dict[str, Any]
    token: str = field(repr=False)

    @property
    def runner_id(self) -> str:
        return str(self.runner["id"])


class AdminClient:
    """``async with AdminClient(url, username=..., password=...) as admin: await admin.login()``"""

    def __init__(self, base_url: str, *, username: str, password: str,
                 origin: str | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self.username = username
        self.password = password
        self.origin = origin or self.base_url
        self.csrf: str | None = None
        self._http: aiohttp.ClientSession | None = None

    @classmethod
    def for_control_plane(cls, cp: Any) -> AdminClient:
        """The bootstrap admin of a ``fake_server.ControlPlane``."""
        return cls(cp.url, username=cp.admin_user, password=cp.admin_password)

    async def __aenter__(self) -> AdminClient:
        self._http = aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True))
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        if self._http is not None:
            await self._http.close()
            self._http = None

    async def request(self, method: str, path: str, json: Any = None, *,
                      expect: Sequence[int] = (200,)) -> Any:
        """One admin request with Origin (and the CSRF header on mutations); the JSON answer."""
        if self._http is None:
            raise RuntimeError("AdminClient used outside 'async with'")
        headers = {"Origin": self.origin}
        if method != "GET" and self.csrf:
            headers["X-CSRF-Token"] = self.csrf
        async with self._http.request(method, self.base_url + path, json=json,
                                      headers=headers) as r:
            try:
                body = await r.json(content_type=None)
            except ValueError:
                body = None
            if r.status not in expect:
                code = body.get("code") if isinstance(body, dict) else None
                raise AdminError(method, path, r.status, code)
            return body

    async def login(self) -> dict[str, Any]:
        """Sign in; keeps the CSRF token; returns the user."""
        body = await self.request("POST", "/api/app/login",
                                  {"username": self.username, "password": self.password})
        self.csrf = body["csrfToken"]
        return dict(body["user"])

    async def session(self) -> dict[str, Any]:
        return dict(await self.request("GET", "/api/app/session"))

    async def logout(self) -> None:
        await self.request("POST", "/api/app/logout")
        self.csrf = None

    async def register(self, name: str, *, profiles: Sequence[str],
                       source: str = "local") -> Registered:
        """Register a runner with explicit ``profiles``; the token is in the answer only."""
        body = await self.request("POST", "/api/app/admin/runners",
                                  {"name": name, "sourceNodeId": source,
                                   "allowedProfiles": list(profiles)}, expect=(201,))
        return Registered(dict(body["runner"]), str(body["token"]))

    async def listing(self) -> dict[str, Any]:
        """The whole ``GET /api/app/admin/runners`` answer."""
        return dict(await self.request("GET", "/api/app/admin/runners"))

    async def list_runners(self) -> list[dict[str, Any]]:
        return list((await self.listing())["runners"])

    async def disable(self, runner_id: str) -> None:
        await self.request("DELETE", f"/api/app/admin/runners/{runner_id}")

    def download_config(self, registered: Registered, *, hermes_url: str,
                        server_url: str | None = None, artifact_roots: Sequence[str] = (),
                        **extra: Any) -> dict[str, Any]:
        """The ``runner.json`` the admin page offers after a registration (same fields, same
        order: protocol, serverURL, runnerId, token, hermesURL, allowedProfiles,
        artifactRoots), with ``extra`` keys (e.g. ``hermesCredentials``) after them."""
        return {"protocol": 1, "serverURL": server_url or self.base_url,
                "runnerId": registered.runner_id, "token": registered.token,
                "hermesURL": hermes_url,
                "allowedProfiles": list(registered.runner["allowedProfiles"]),
                "artifactRoots": list(artifact_roots), **extra}
