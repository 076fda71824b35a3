"""aiohttp handlers of the machine API ``/api/runner/v1/{runnerId}/{route}``.

They only translate: faults first (the harness's simulated network), then the gate sequence of
``gates`` (headers only), the hub's state changes, the body gate, and the route in ``hub``.
Every exchange is appended to the history. Every answer is JSON with ``Cache-Control: no-store``;
no handler lets an exception escape as an HTML 500.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from aiohttp import web

from .commands import poll_json
from .gates import RUNNER_ID_RE, Ask, body_limit, check_body, decide
from .history import Exchange, digest

if TYPE_CHECKING:
    from .control import ControlPlane

log = logging.getLogger("fake_server.machine")

PREFIX = "/api/runner/v1/"
NO_STORE = {"Cache-Control": "no-store"}
_DRAIN_CAP = 256 * 1024 * 1024


def _json(status: int, body: dict[str, Any], raw: bytes | None = None) -> web.Response:
    return web.Response(
        status=status,
        body=raw if raw is not None else json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode("utf-8"),
        content_type="application/json",
        headers=NO_STORE,
    )


def _err(code: str, message: str) -> dict[str, Any]:
    return {"error": message, "code": code}


async def _read_limited(request: web.Request, limit: int) -> bytes | None:
    """The body, or None when it exceeds ``limit`` (the rest is drained so the client hears us)."""
    if request.content_length is not None and request.content_length > _DRAIN_CAP:
        return None
    buf = bytearray()
    over = False
    while True:
        chunk = await request.content.read(1 << 16)
        if not chunk:
            break
        if not over:
            buf += chunk
            if len(buf) > limit:
                over = True
                buf = bytearray()
    return None if over else bytes(buf)


def make_handler(cp: ControlPlane) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
    async def handle(request: web.Request) -> web.StreamResponse:
        runner_id = request.match_info.get("runner_id", "")
        route = request.match_info.get("route", "")
        h = request.headers
        ex = cp.history.begin(
            time=cp.clock.now(),
            route=route,
            method=request.method,
            runner_id=runner_id,
            instance=h.get("x-runner-instance"),
            request_epoch=h.get("x-runner-epoch"),
            reset=h.get("x-runner-reset") == "1",
            request_digest=None,
            request_body=None,
        )
        try:
            return await _handle(cp, request, ex, runner_id, route)
        except BaseException as exc:
            if ex.status is None and ex.fault is None:
                ex.fault = "client_gone" if not isinstance(exc, Exception) else "internal_error"
            if isinstance(exc, Exception):
                log.exception("machine API failure on %s", route)
                print(f"fake_server: internal error on route {route}: {type(exc).__name__}", file=sys.stderr)
                return _answer(cp, ex, runner_id, 500, _err("internal_error", "internal error"))
            raise

    return handle


def _answer(
    cp: ControlPlane, ex: Exchange, runner_id: str, status: int, body: dict[str, Any], raw: bytes | None = None
) -> web.Response:
    resp = _json(status, body, raw)
    ex.status = status
    ex.code = body.get("code") if status >= 400 else None
    ex.response_body = body
    ex.response_digest = digest(resp.body if isinstance(resp.body, bytes) else None)
    ex.epoch = cp.hub.epoch(runner_id)
    ex.end_time = cp.clock.now()
    return resp


async def _handle(
    cp: ControlPlane, request: web.Request, ex: Exchange, runner_id: str, route: str
) -> web.StreamResponse:
    fault = cp.faults.take(route)
    if fault is not None:
        ex.fault = fault.kind
        if fault.kind == "fail":
            return _answer(cp, ex, runner_id, fault.status, _err(fault.code, "injected failure"))
        if fault.kind == "drop":
            ex.end_time = cp.clock.now()
            if request.transport is not None:
                request.transport.abort()
            # Never reaches the client (the socket is gone); still JSON and no-store.
            return _json(503, _err("service_unavailable", "connection dropped"))
        await cp.clock.sleep(fault.seconds)

    h = request.headers
    hub = cp.hub
    record = await cp.store.get_runner(runner_id) if RUNNER_ID_RE.match(runner_id) else None
    ask = Ask.from_headers(route, request.method, h, allowed_hosts=cp.allowed_hosts)
    decision = decide(ask, hub.view(record, runner_id))
    online, created = None, False
    if decision.actions:
        online, created = await hub.apply(runner_id, ask, decision.actions, record)
    if decision.refusal is not None:
        r = decision.refusal
        return _answer(cp, ex, runner_id, r.status, _err(r.code, r.message))
    assert online is not None

    if route == "poll":
        status, body = await hub.poll(runner_id, online, created)
        raw = poll_json(body["epoch"], body["commands"]) if status == 200 else None
        return _answer(cp, ex, runner_id, status, body, raw)

    limit = body_limit(route, cp.limits.request_body, cp.limits.desktop_body)
    raw = await _read_limited(request, limit)
    ex.request_digest = digest(raw)
    parsed, refusal = check_body(raw, limit)
    if refusal is not None:
        return _answer(cp, ex, runner_id, refusal.status, _err(refusal.code, refusal.message))
    assert parsed is not None
    ex.request_body = parsed
    status, body = await _route(cp, runner_id, route, parsed)
    return _answer(cp, ex, runner_id, status, body)


async def _route(cp: ControlPlane, runner_id: str, route: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    hub = cp.hub
    if route == "admit":
        return 200, {"allowed": await hub.admit(runner_id, body)}
    if route == "result":
        if not isinstance(body.get("id"), str):
            return 400, _err("invalid_workspace_request", "invalid request")
        err = body.get("error")
        if err is not None and not isinstance(err, dict):
            return 400, _err("invalid_workspace_request", "invalid request")
        await hub.result(runner_id, body)
        return 200, {"ok": True}
    if route == "event":
        return await hub.event(runner_id, body)
    if route == "tool":
        return await hub.tool(runner_id, body)
    if route == "check":
        return 200, await hub.check(runner_id, body)
    if route == "artifact":
        return await hub.artifact(runner_id, body)
    # Extension routes: this control plane grants no VM, browser, desktop or proxy scope.
    if route in ("control-check", "local-vm-check", "browser-check"):
        return 200, {"allowed": False}
    if route == "desktop":
        return 403, _err("compose_desktop_forbidden", "compose desktop not allowed")
    if route == "execution-context":
        return 403, _err("execution_grant_revoked", "execution grant revoked")
    if route == "network-settings":
        return 200, {"proxy": None}
    return 404, _err("not_found", "unknown runner route")


async def _not_found(request: web.Request) -> web.StreamResponse:
    return _json(404, _err("not_found", "unknown runner route"))


@web.middleware
async def _json_errors(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    """Under the machine prefix even aiohttp's own 404/405 answers are JSON and no-store."""
    if request.path != "/api/runner" and not request.path.startswith("/api/runner/"):
        return await handler(request)
    try:
        return await handler(request)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        return _json(exc.status, _err(_HTTP_CODES.get(exc.status, "invalid_request"), exc.reason))


_HTTP_CODES = {404: "not_found", 405: "method_not_allowed", 413: "runner_payload_limit"}


def setup_machine(app: web.Application, cp: ControlPlane) -> None:
    app.middlewares.append(_json_errors)
    app.router.add_route("*", PREFIX + "{runner_id}/{route}", make_handler(cp))
    app.router.add_route("*", PREFIX + r"{tail:[\s\S]*}", _not_found)
