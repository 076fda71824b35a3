"""One lease's loopback listener: an aiohttp server on 127.0.0.1:0 with a per-lease token (§6).

The handler only translates HTTP to the sans-IO modules: ``gates`` decides refusals, ``calls``
dedupes and wraps, ``ids`` hides the real tool ids. Calls are relayed with the REAL tool id.

§5 limits and how closely aiohttp follows them:
- ≤30 headers: aiohttp's ``max_headers`` (a request with more is answered 400 text/plain by
  aiohttp's parser, before any gate; Node would truncate instead). A duplicate Host header is
  likewise a 400 from the parser (the gates would answer 403).
- keep-alive 1 s: aiohttp's ``keepalive_timeout``.
- request 15 s: bounds reading the body (``408 request_timeout``); a relayed call may run longer.
- headers 10 s: aiohttp has no header-read timeout, but its keep-alive timer also runs from the
  moment a connection opens until a request head is complete, so a head not received within the
  keep-alive time (1 s) gets the connection closed: stricter than upstream's 10 s.

``aiohttp.web`` is imported when a listener starts, not with this module: a runner that never
binds a lease does not pay for the server half of aiohttp at start-up (about 40 ms of CPU on
each start; certify starts the runner some two hundred times).
"""
from __future__ import annotations

import asyncio
import dataclasses
import logging
import secrets
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from runner_ref import codes, timings
from runner_ref.timings import MAX_CALLS

from . import gates
from .call_book import CallBook
from .call_rules import Call, ListenerAnswer, error_answer, parse_call
from .ids import id_map, opaque_id

if TYPE_CHECKING:
    from aiohttp import web

RelayCall = Callable[[str, dict[str, Any], str], Awaitable[Any]]
"""(real tool id, arguments, callId) → the control plane's result (raises on failure)."""

_quiet = logging.getLogger("runner_ref.teamtools.listener")
# aiohttp logs a traceback for every malformed request; the runner's stderr is for status lines.
_http_log = logging.getLogger("runner_ref.teamtools.listener.http")
_http_log.addHandler(logging.NullHandler())
_http_log.propagate = False


@dataclass(frozen=True)
class ListenerTimings:
    request: float = timings.LISTENER_REQUEST_TIMEOUT
    keepalive: float = timings.LISTENER_KEEPALIVE
    max_headers: int = timings.LISTENER_MAX_HEADERS
    shutdown: float = timings.LISTENER_SHUTDOWN


@dataclass(frozen=True)
class ToolSpec:
    id: str
    name: str
    description: str
    input_schema: Any

    @classmethod
    def from_catalog(cls, entry: Mapping[str, Any]) -> ToolSpec:
        return cls(str(entry["id"]), str(entry["name"]), str(entry.get("description", "")),
                   entry.get("inputSchema", {"type": "object"}))


class LoopbackListener:
    """Serve ``/tools/list`` and ``/tools/call`` for one lease until ``close()``."""

    def __init__(self, *, tools: Sequence[ToolSpec], relay: RelayCall,
                 is_active: Callable[[], bool], token: str | None = None,
                 timings: ListenerTimings | None = None, call_limit: int = MAX_CALLS) -> None:
        self.token = token or secrets.token_urlsafe(32)
        self._tools = list(tools)
        self._real = id_map(self.token, (t.id for t in self._tools))
        self._relay = relay
        self._is_active = is_active
        self._timings = timings or ListenerTimings()
        self.calls = CallBook(call_limit)
        self._runner: web.ServerRunner | None = None
        self._host = ""
        self.port = 0

    @property
    def host(self) -> str:
        """The address the listener's socket is bound to ("" before :meth:`start`)."""
        return self._host

    @property
    def url(self) -> str:
        return f"http://{gates.ALLOWED_PEER}:{self.port}"

    def listing(self) -> dict[str, Any]:
        tools = [{"id": opaque_id(self.token, t.id), "name": t.name,
                  "description": t.description, "inputSchema": t.input_schema}
                 for t in self._tools]
        return {"tools": tools, "warnings": []}

    async def start(self) -> None:
        from aiohttp import web

        server = web.Server(self._handle, access_log=None, logger=_http_log,
                            keepalive_timeout=self._timings.keepalive,
                            max_headers=self._timings.max_headers)
        runner = web.ServerRunner(server, shutdown_timeout=self._timings.shutdown)
        await runner.setup()
        site = web.TCPSite(runner, gates.ALLOWED_PEER, 0)
        try:
            await site.start()
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        self._host, self.port = runner.addresses[0][:2]

    async def close(self) -> None:
        runner, self._runner = self._runner, None
        await self.calls.cancel_all()
        if runner is not None:
            await runner.cleanup()

    # -- HTTP translation -------------------------------------------------------------------
    async def _handle(self, request: web.BaseRequest) -> web.StreamResponse:
        from aiohttp import web

        try:
            outcome = await self._answer(request)
        except Exception:  # never a 500 with a traceback; nothing secret is logged
            _quiet.warning("team tools listener: request failed")
            outcome = error_answer(codes.LISTENER_FAILED)
        return web.json_response(outcome.body, status=outcome.status,
                                 headers={"Cache-Control": "no-store"})

    async def _answer(self, request: web.BaseRequest) -> ListenerAnswer:
        peer = request.transport.get_extra_info("peername") if request.transport else None
        head = gates.GateInput(
            peer_ip=peer[0] if peer else None,
            host=request.headers.get("Host"),
            host_count=len(request.headers.getall("Host", [])),
            origin=request.headers.get("Origin"),
            authorization=request.headers.get("Authorization"),
            lease_active=self._is_active(),
            method=request.method,
            content_type=request.headers.get("Content-Type"),
            content_length=request.content_length,
        )
        ctx = gates.Context(port=self.port, token=self.token)
        refusal = gates.check_head(head, ctx)
        if refusal is not None:
            return ListenerAnswer(refusal.status, refusal.body())
        if request.headers.get("Expect", "").lower() == "100-continue":  # e.g. curl, big bodies
            await request.writer.write(b"HTTP/%d.%d 100 Continue\r\n\r\n" % request.version)
        try:
            body = await asyncio.wait_for(_read_bounded(request, gates.MAX_BODY_BYTES),
                                          self._timings.request)
        except TimeoutError:
            return error_answer(codes.REQUEST_TIMEOUT)
        verdict = gates.check(dataclasses.replace(head, body=body), ctx)
        if isinstance(verdict, gates.Refusal):
            return ListenerAnswer(verdict.status, verdict.body())
        return await self._route(request.path, verdict.body)

    async def _route(self, path: str, body: dict[str, Any]) -> ListenerAnswer:
        if path == "/tools/list":
            return ListenerAnswer(200, self.listing())
        if path != "/tools/call":
            return error_answer(codes.NOT_FOUND)
        call = parse_call(body)
        if isinstance(call, ListenerAnswer):
            return call
        real = self._real.get(call.tool_id)
        if real is None:
            return error_answer(codes.TEAM_TOOL_NOT_FOUND)
        return await self.calls.run(call, lambda: self._relay_call(real, call))

    async def _relay_call(self, real_id: str, call: Call) -> Any:
        return await self._relay(real_id, call.arguments, call.call_id)


async def _read_bounded(request: web.BaseRequest, limit: int) -> bytes:
    """Read at most ``limit + 1`` bytes: enough to tell an oversized body, never more."""
    parts: list[bytes] = []
    size = 0
    while size <= limit:
        chunk = await request.content.read(min(65536, limit + 1 - size))
        if not chunk:
            break
        parts.append(chunk)
        size += len(chunk)
    return b"".join(parts)
