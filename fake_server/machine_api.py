"""aiohttp handlers of the machine API ``/api/runner/v1/{runnerId}/{route}`` (the HTTP edge).

They only translate: route faults first (the harness's simulated network), then the gate
sequence of ``gates`` (headers only), the hub's state changes, the body gate, targeted faults,
and the route (``ROUTES``). Every exchange is appended to the history. Every answer is JSON
with ``Cache-Control: no-store`` built by ``codes.error_body``; no handler lets an exception
escape as an HTML 500, and a request that meets a closing hub (restart, shutdown) gets 503
``service_stopping``, never a 500 or an assertion.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from . import codes
from .clock import Clock
from .codes import NO_STORE, error_body
from .faults import Faults
from .gates import RUNNER_ID_RE, Ask, body_limit, check_body, decide
from .history import Exchange, History, digest
from .hub import Hub
from .relay import tool_route
from .store import Store
from .timings import Limits
from .wire import poll_json

log = logging.getLogger("fake_server.machine")

PREFIX = "/api/runner/v1/"
_DRAIN_CAP = 256 * 1024 * 1024
Answer = tuple[int, dict[str, Any]]


@dataclass(frozen=True)
class MachineDeps:
    """What the machine API reads: concrete objects of ONE hub lifetime (rebuilt on restart)."""

    hub: Hub
    store: Store
    history: History
    clock: Clock
    faults: Faults
    limits: Limits
    allowed_hosts: frozenset[str] | None


def _json(status: int, body: dict[str, Any], raw: bytes | None = None) -> web.Response:
    return web.Response(
        status=status,
        body=raw if raw is not None else json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode("utf-8"),
        content_type="application/json",
        headers=NO_STORE,
    )


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


STOPPING: Answer = codes.refusal(codes.SERVICE_STOPPING)


def make_handler(deps: MachineDeps) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
    async def handle(request: web.Request) -> web.StreamResponse:
        runner_id = request.match_info.get("runner_id", "")
        route = request.match_info.get("route", "")
        h = request.headers
        ex = deps.history.begin(
            time=deps.clock.now(), route=route, method=request.method, runner_id=runner_id,
            instance=h.get("x-runner-instance"), request_epoch=h.get("x-runner-epoch"),
            reset=h.get("x-runner-reset") == "1", request_digest=None, request_body=None,
        )
        try:
            return await _handle(deps, request, ex, runner_id, route)
        except BaseException as exc:
            if ex.status is None and ex.fault is None:
                ex.fault = "client_gone" if not isinstance(exc, Exception) else codes.INTERNAL_ERROR.code
            if not isinstance(exc, Exception):
                deps.history.finish(ex)
                raise
            if deps.hub.closed:  # the store or hub went away under the request: a restart
                ex.fault = None
                return _answer(deps, ex, runner_id, *STOPPING)
            log.exception("machine API failure on %s", route)
            print(f"fake_server: internal error on route {route}: {type(exc).__name__}", file=sys.stderr)
            return _answer(deps, ex, runner_id, *codes.refusal(codes.INTERNAL_ERROR))

    return handle


def _answer(
    deps: MachineDeps, ex: Exchange, runner_id: str, status: int, body: dict[str, Any], raw: bytes | None = None
) -> web.Response:
    resp = _json(status, body, raw)
    ex.status = status
    ex.code = body.get("code") if status >= 400 else None
    ex.response_body = body
    ex.response_digest = digest(resp.body if isinstance(resp.body, bytes) else None)
    ex.epoch = deps.hub.epoch(runner_id)
    ex.end_time = deps.clock.now()
    deps.history.finish(ex)
    return resp


async def _apply_fault(deps: MachineDeps, request: web.Request, ex: Exchange, runner_id: str,
                       route: str, targets: tuple[str | None, ...] | None) -> web.StreamResponse | None:
    fault = deps.faults.take(route, targets)
    if fault is None:
        return None
    ex.fault = fault.kind
    if fault.kind == "fail":
        return _answer(deps, ex, runner_id, fault.status, error_body(fault.code, "injected failure"))
    if fault.kind == "drop":
        ex.end_time = deps.clock.now()
        deps.history.finish(ex)
        if request.transport is not None:
            request.transport.abort()
        # Never reaches the client (the socket is gone); still JSON and no-store.
        return _json(*codes.refusal(codes.SERVICE_UNAVAILABLE, "connection dropped"))
    await deps.clock.sleep(fault.seconds)
    return None


async def _handle(
    deps: MachineDeps, request: web.Request, ex: Exchange, runner_id: str, route: str
) -> web.StreamResponse:
    faulted = await _apply_fault(deps, request, ex, runner_id, route, None)
    if faulted is not None:
        return faulted
    hub = deps.hub
    if hub.closed:
        return _answer(deps, ex, runner_id, *STOPPING)
    h = request.headers
    record = await deps.store.get_runner(runner_id) if RUNNER_ID_RE.match(runner_id) else None
    ask = Ask.from_headers(route, request.method, h, allowed_hosts=deps.allowed_hosts)
    decision = decide(ask, hub.view(record, runner_id))
    online, created = None, False
    if decision.actions:
        online, created = await hub.apply(runner_id, ask, decision.actions, record)
    if decision.refusal is not None:
        r = decision.refusal
        return _answer(deps, ex, runner_id, r.status, error_body(r.code, r.message))
    if online is None or hub.closed:  # dropped while we awaited the store: a restart or a disconnect
        if hub.closed:
            return _answer(deps, ex, runner_id, *STOPPING)
        return _answer(deps, ex, runner_id, *codes.refusal(codes.RUNNER_INSTANCE_CHANGED))

    if route == "poll":
        status, body = await hub.poll(runner_id, online, created, ex.seq)
        raw = poll_json(body["epoch"], body["commands"]) if status == 200 else None
        return _answer(deps, ex, runner_id, status, body, raw)

    limit = body_limit(route, deps.limits.request_body, deps.limits.desktop_body)
    raw = await _read_limited(request, limit)
    ex.request_digest = digest(raw)
    parsed, refusal = check_body(raw, limit)
    if refusal is not None:
        return _answer(deps, ex, runner_id, refusal.status, error_body(refusal.code, refusal.message))
    assert parsed is not None  # check_body gives one of the two
    deps.history.body_read(ex, parsed)
    targets = (ex.command_id, ex.connection_id, ex.lease_id, ex.call_id)
    faulted = await _apply_fault(deps, request, ex, runner_id, route, targets)
    if faulted is not None:
        return faulted
    handler = ROUTES.get(route)
    status, body = await handler(deps, runner_id, parsed) if handler else codes.refusal(codes.NOT_FOUND)
    return _answer(deps, ex, runner_id, status, body)


# -- routes: one row per route ---------------------------------------------------------------------

Route = Callable[[MachineDeps, str, dict[str, Any]], Awaitable[Answer]]


async def _admit(d: MachineDeps, rid: str, body: dict[str, Any]) -> Answer:
    return 200, {"allowed": await d.hub.admit(rid, body)}


async def _result(d: MachineDeps, rid: str, body: dict[str, Any]) -> Answer:
    await d.hub.result(rid, body)  # upstream validates no schema: unknown or ill-typed ids are ignored
    return 200, {"ok": True}


async def _tool(d: MachineDeps, rid: str, body: dict[str, Any]) -> Answer:
    return await tool_route(body, d.hub.slot(rid).leases.get, d.hub.lease_active)


async def _check(d: MachineDeps, rid: str, body: dict[str, Any]) -> Answer:
    return 200, await d.hub.check(rid, body)


def _fixed(status: int, body: dict[str, Any]) -> Route:
    async def answer(d: MachineDeps, rid: str, b: dict[str, Any]) -> Answer:
        return status, dict(body)
    return answer


ROUTES: dict[str, Route] = {
    "admit": _admit,
    "result": _result,
    "event": lambda d, rid, b: d.hub.event(rid, b),
    "tool": _tool,
    "check": _check,
    "artifact": lambda d, rid, b: d.hub.artifact(rid, b),
    # Extension routes: this control plane grants no VM, browser, desktop or proxy scope.
    "control-check": _fixed(200, {"allowed": False}),
    "local-vm-check": _fixed(200, {"allowed": False}),
    "browser-check": _fixed(200, {"allowed": False}),
    "desktop": _fixed(*codes.refusal(codes.COMPOSE_DESKTOP_FORBIDDEN)),
    "execution-context": _fixed(*codes.refusal(codes.EXECUTION_GRANT_REVOKED)),
    "network-settings": _fixed(200, {}),  # upstream: {} when no network settings exist
}


async def _not_found(request: web.Request) -> web.StreamResponse:
    return _json(*codes.refusal(codes.NOT_FOUND))


_HTTP_CODES: dict[int, codes.Code] = {404: codes.NOT_FOUND, 405: codes.METHOD_NOT_ALLOWED,
                                      413: codes.RUNNER_PAYLOAD_LIMIT}


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
        return _json(exc.status, error_body(_HTTP_CODES.get(exc.status, codes.BAD_REQUEST), exc.reason))


def setup_machine(app: web.Application, deps: MachineDeps) -> None:
    app.middlewares.append(_json_errors)
    app.router.add_route("*", PREFIX + "{runner_id}/{route}", make_handler(deps))
    app.router.add_route("*", PREFIX + r"{tail:[\s\S]*}", _not_found)
