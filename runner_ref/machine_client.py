"""The control-plane client: the machine API of protocol 1 §2 (one aiohttp session per peer).

Rules:
- URL ``{serverURL}/api/runner/v1/{runnerId}/{route}``; ``poll`` is a bodiless GET, every other
  route a POST of a JSON object. No redirects are followed; no Origin header is ever sent.
- Headers on every request: ``Authorization: Bearer``, ``x-runner-instance``,
  ``x-runner-protocol: 1``, ``x-runner-features``; ``x-runner-epoch`` on every non-poll route;
  ``x-runner-reset: 1`` on a poll while locally disconnected.
- A non-2xx answer raises :class:`ServerError` with the server's code; without one the code is
  ``runner_unauthorized`` for 403 and ``runner_request_failed`` otherwise; the message is cut to
  300 chars. A transport failure is ``runner_request_failed`` (status 0). Responses are read up
  to 40 MiB.
"""
from __future__ import annotations

import json
from typing import Any

import aiohttp

from . import codes, timings
from .bodies import read_capped
from .errors import ServerError

FEATURES_BASE = ("execution-context-v1", "workspace-memory-bind-v1")


def features_header(browser_enabled: bool) -> str:
    """What this runner advertises. It has no VM worker and no managed browser, so it always
    reports the browser as disabled, whatever the config says."""
    del browser_enabled  # no managed browser in the reference runner
    return ",".join((*FEATURES_BASE, "managed-browser-disabled-v1", "credential-ref-v1"))


class MachineClient:
    """Requests to the machine API; raises :class:`ServerError` for every failure.

    Per-request work is kept small: one session, header dicts built once (per epoch for the
    POST routes), timeouts built once, no cookie jar, bodies encoded once."""

    def __init__(self, server_url: str, runner_id: str, token: str, instance_id: str,
                 features: str) -> None:
        self._base = f"{server_url}/api/runner/v1/{runner_id}/"
        self._headers = {
            "Authorization": f"Bearer {token}",
            "x-runner-instance": instance_id,
            "x-runner-protocol": "1",
            "x-runner-features": features,
        }
        self._poll_headers = {False: dict(self._headers),
                              True: {**self._headers, "x-runner-reset": "1"}}
        self._post_headers: dict[str | None, dict[str, str]] = {}
        self._timeouts: dict[float, aiohttp.ClientTimeout] = {}
        self._session: aiohttp.ClientSession | None = None
        self.epoch: str | None = None

    def _http(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=0, force_close=False),
                cookie_jar=aiohttp.DummyCookieJar(),
                auto_decompress=True, skip_auto_headers=("User-Agent",),
            )
        return self._session

    def _timeout(self, seconds: float) -> aiohttp.ClientTimeout:
        t = self._timeouts.get(seconds)
        if t is None:
            t = self._timeouts[seconds] = aiohttp.ClientTimeout(total=seconds)
        return t

    def _headers_for_post(self, epoch: str | None) -> dict[str, str]:
        h = self._post_headers.get(epoch)
        if h is None:
            if len(self._post_headers) > 8:   # old epochs are never used again
                self._post_headers.clear()
            h = {**self._headers, "Content-Type": "application/json"}
            if epoch is not None:
                h["x-runner-epoch"] = epoch
            self._post_headers[epoch] = h
        return h

    async def poll(self, reset: bool) -> dict[str, Any]:
        body = await self._request("GET", "poll", self._poll_headers[reset], None,
                                   timings.POLL_TIMEOUT)
        if not isinstance(body, dict) or not isinstance(body.get("epoch"), str) \
                or not isinstance(body.get("commands", []), list):
            raise ServerError.of(codes.REQUEST_FAILED, message="malformed poll response")
        return body

    async def post(self, route: str, payload: dict[str, Any], epoch: str | None = None,
                   timeout: float | None = None) -> Any:
        data = json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode()
        return await self.post_encoded(route, data, epoch, timeout)

    async def post_encoded(self, route: str, data: bytes, epoch: str | None = None,
                           timeout: float | None = None) -> Any:
        """:meth:`post` with a body already encoded as a JSON object."""
        headers = self._headers_for_post(epoch if epoch is not None else self.epoch)
        return await self._request("POST", route, headers, data,
                                   timeout if timeout is not None else timings.REQUEST_TIMEOUT)

    async def _request(self, method: str, route: str, headers: dict[str, str],
                       data: bytes | None, timeout: float) -> Any:
        try:
            async with self._http().request(
                    method, self._base + route, headers=headers, data=data,
                    allow_redirects=False, timeout=self._timeout(timeout)) as resp:
                raw = await read_capped(resp, timings.RESPONSE_CAP)
                status = resp.status
        except (TimeoutError, aiohttp.ClientError, OSError):
            raise ServerError.of(codes.REQUEST_FAILED, status=0) from None
        if raw is None:
            raise ServerError.of(codes.REQUEST_FAILED, status, "response too large")
        try:
            body = json.loads(raw) if raw else None
        except (ValueError, RecursionError):
            body = None
        if 200 <= status < 300:
            return body
        code = body.get("code") if isinstance(body, dict) else None
        message = body.get("error") if isinstance(body, dict) else None
        if not isinstance(code, str) or not code:
            code = (codes.UNAUTHORIZED if status == 403 else codes.REQUEST_FAILED).code
        if not isinstance(message, str) or not message:
            message = f"HTTP {status}"
        raise ServerError(status, code, message[: timings.SERVER_ERROR_CAP])

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
