"""Helpers of the wire, permission and secrets cases (candidates for a shared helper module).

Rules:
- Everything here drives the runner only through the world (control plane, scripted Hermes):
  nothing imports the runner under test.
- Witness lines are :func:`conformance.witness.witness` lines of the world's redacted
  transcript, cut to what names the command (or connection) the verdict is about.
- Waits are bounded (``TIMEOUT``); nothing sleeps.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterable, Sequence
from typing import Any
from urllib.parse import urlencode

TIMEOUT = 10.0
#: A UUID in lower case, grouped 8-4-4-4-12 (stricter than gate 2's ``[0-9a-f-]{36}``).
LOWER_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


def runner_exchanges(world: Any, route: str | None = None) -> list[Any]:
    """The history exchanges of this world's runner, in arrival order."""
    return world.cp.history.filter(route=route, runner_id=world.runner_id)


def search(profile: str | None = "default", query: dict[str, str] | None = None) -> str:
    """An ``http`` ``search`` string as JavaScript's ``URL.search`` gives it."""
    items = {**({"profile": profile} if profile is not None else {}), **(query or {})}
    return "?" + urlencode(items) if items else ""


def http_payload(path: str, *, method: str = "GET", profile: str | None = "default",
                 file: str | None = None) -> dict[str, Any]:
    """An ``http`` payload; ``file`` is the ``path`` query of a download."""
    return {"path": path, "method": method,
            "search": search(profile, {"path": file} if file is not None else None)}


async def http(world: Any, path: str, *, method: str = "GET", profile: str | None = "default",
               file: str | None = None) -> tuple[Any, Any]:
    """Submit one ``http`` command and await it: (handle, outcome)."""
    handle = await world.cp.submit(world.runner_id, "http",
                                   http_payload(path, method=method, profile=profile, file=file))
    return handle, await handle.wait(TIMEOUT)


def body_bytes(result: Any) -> bytes | None:
    """The decoded ``body`` of an ``http`` result, or None when it has none."""
    if not isinstance(result, dict) or not isinstance(result.get("body"), str):
        return None
    try:
        return base64.b64decode(result["body"], validate=True)
    except ValueError:
        return None


def describe(outcome: Any) -> str:
    if outcome is None:
        return "no outcome"
    if outcome.ok:
        return f"200 result {json.dumps(outcome.result, default=str)[:200]}"
    return f"{outcome.status} {outcome.code} ({(outcome.message or '')[:120]})"


def result_posts(world: Any, command_id: str) -> list[Any]:
    return world.cp.history.filter(route="result", where=lambda ex: ex.command_id == command_id)


def posted_code(ex: Any) -> str | None:
    """The error code of a result post (None for a success)."""
    body = ex.request_body if isinstance(ex.request_body, dict) else {}
    err = body.get("error")
    return str(err.get("code")) if isinstance(err, dict) and err.get("code") is not None else None


def effects_after(world: Any, seq: int, kinds: Iterable[str] | None = None) -> list[Any]:
    """Hermes effects with ``seq`` > ``seq`` (of ``kinds`` when given)."""
    wanted = set(kinds) if kinds is not None else None
    return [e for e in world.hermes.effects.entries if e.seq > seq
            and (wanted is None or e.kind in wanted)]


def refused_with(outcome: Any, codes: Sequence[str]) -> bool:
    """The outcome is the runner's error result with one of ``codes``: 502 carrying the runner's
    code (a refusal by the control plane itself has another status and does not count)."""
    return (outcome is not None and not outcome.ok and outcome.status == 502
            and outcome.code in codes)


async def event_posted(world: Any, ch: Any, sid: str, kind: str = "session.info",
                       timeout: float = 10.0) -> Any:
    """The answered ``event`` post of the runner that forwards the ``kind`` frame of ``sid`` on
    ``ch``. A case that revokes a channel awaits it first: a runner may post events late (the
    positive control ``late-events`` posts each 100 ms late), and an event answered after the
    revoke gets the control plane's 410, which closes the channel — the oracle's doing, which
    the case would otherwise read as the runner's."""
    def match(ex: Any) -> bool:
        frame = ex.request_body.get("frame") if isinstance(ex.request_body, dict) else None
        return (ex.route == "event" and ex.answered and ex.connection_id == ch.connection_id
                and isinstance(frame, dict) and frame.get("type") == kind
                and frame.get("session_id") == sid)
    return await world.cp.history.wait_for(match, timeout=timeout)


async def open_session(world: Any, profile: str = "default") -> tuple[Any, str]:
    """A channel and one session created through it: (channel, live session id)."""
    ch = await world.cp.open_channel(world.runner_id, profile=profile)
    out = await world.cp.rpc(ch, "session.create", {"profile": profile, "cols": 100})
    if not out.ok or not isinstance(out.result, dict) or "session_id" not in out.result:
        raise AssertionError(f"session.create through the runner failed: {describe(out)}")
    return ch, str(out.result["session_id"])


# -- a recording proxy: the request headers the history does not keep --------------------------

_HOP = frozenset({"host", "content-length", "transfer-encoding", "connection", "keep-alive"})


class HeaderTap:
    """A loopback HTTP proxy in front of the control plane that records every request's headers
    (``Authorization`` kept only as a verdict, never its value) and forwards the request as is.

    ``async with HeaderTap(world.cp.url, secrets=world.secrets) as tap:`` then point the runner's
    ``serverURL`` at ``tap.url``. ``tap.requests`` holds ``(path, headers)`` in arrival order;
    the ``authorization`` entry is ``"Bearer <token>"`` when it was exactly that, else the
    redacted value."""

    def __init__(self, upstream: str, *, token: str, secrets: Any) -> None:
        self.upstream = upstream.rstrip("/")
        self.token = token
        self.secrets = secrets
        self.requests: list[tuple[str, dict[str, str]]] = []
        self.url = ""
        self._runner: Any = None
        self._client: Any = None

    async def __aenter__(self) -> HeaderTap:
        import aiohttp
        from aiohttp import web

        self._client = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None))
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._forward)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.2)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = self._runner.addresses[0][1]  # the bound (host, port): public AppRunner API
        self.url = f"http://127.0.0.1:{port}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
        if self._client is not None:
            await self._client.close()

    def _record(self, path: str, headers: Any) -> None:
        seen: dict[str, str] = {}
        for name, value in headers.items():
            key = name.lower()
            if key == "authorization":
                value = "Bearer <token>" if value == f"Bearer {self.token}" else \
                    self.secrets.redact(value)
            seen[key] = value if key not in seen else f"{seen[key]}, {value}"
        self.requests.append((path, seen))

    async def _forward(self, request: Any) -> Any:
        import aiohttp
        from aiohttp import web

        self._record(request.path_qs, request.headers)
        body = await request.read()
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP}
        try:
            async with self._client.request(request.method, self.upstream + request.path_qs,
                                            headers=headers, data=body or None,
                                            allow_redirects=False) as resp:
                data = await resp.read()
                out = {k: v for k, v in resp.headers.items() if k.lower() not in _HOP}
                return web.Response(status=resp.status, body=data, headers=out)
        except aiohttp.ClientError:  # the control plane went away (restart, teardown)
            return web.Response(status=502, body=b'{"error":"tap","code":"bad_gateway"}',
                                content_type="application/json")

    def route_of(self, path: str) -> str:
        return path.split("?", 1)[0].rsplit("/", 1)[-1]


async def enter_tap(world: Any) -> HeaderTap:
    """A new :class:`HeaderTap` in front of the control plane, entered, with the (not yet
    started) runner's serverURL pointed at it; the caller starts the runner and leaves the tap
    with ``await tap.__aexit__()``, so what the tap recorded is kept even when the start fails."""
    tap = HeaderTap(world.cp.url, token=world.registered.token, secrets=world.secrets)
    await tap.__aenter__()
    world.runner.config["serverURL"] = tap.url
    world.runner.write_config()
    return tap
