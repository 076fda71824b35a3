"""One gateway channel of the runner: a Hermes WebSocket, its owned sessions, its ordered event
poster (protocol 1 §3 gateway.*; the registry and the rules of open/rpc/close are
:mod:`runner_ref.gateway`).

Rules:
- A session is the channel's from the moment the reader reads its create/resume reply (in wire
  order, before the next frame): ``call(..., on_result=…)`` runs the hook in the reader.
- Only frames of sessions this channel owns are forwarded, in order, as the ``params`` of the
  Hermes ``event`` notification; ``message.complete`` clears the running state;
  ``message.start`` and a ``session.info`` with ``payload.running: true`` set it (a turn
  Hermes starts on its own, such as a queued prompt, is running too); ``session.info``
  updates the stored id and tells the registry.
- A 410 on ``event`` closes just this channel (``registry.close_later``); any other posting
  failure disconnects the runner (``registry.on_fatal``). When Hermes closes the socket the
  channel posts ``{connectionId, closed: true}`` and the registry forgets it.
- ``close``: interrupt running sessions and close the socket within one
  ``timings.INTERRUPT_WAIT`` budget; a second close waits for the first.
A JSON-RPC error from Hermes becomes ``hermes_rpc_error`` with Hermes' message (capped).
The session ownership rules are also the control plane's; they are written independently in
fake_server on purpose.
"""
from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

import aiohttp

from . import codes, timings
from .errors import CommandError, ServerError
from .hermes import HermesClient

#: frames after which a session is no longer running (§3.2 MUST)
COMPLETION_EVENTS = frozenset({"message.complete"})
#: frames after which a session is running (§3.2 SHOULD): a turn Hermes starts by itself (the
#: next queued prompt) is announced only by its message.start
START_EVENTS = frozenset({"message.start"})

PostEvent = Callable[[dict[str, Any]], Awaitable[Any]]


class Registry(Protocol):
    """What a channel needs of the registry that opened it (:class:`runner_ref.gateway.Gateways`)."""

    post_event: PostEvent
    on_fatal: Callable[[], None]

    def forget(self, connection_id: str) -> None: ...
    def session_info(self, runtime_id: str, stored_id: str) -> None: ...
    def close_later(self, connection_id: str) -> None: ...


def plain_error(message: str) -> CommandError:
    """A plain refusal (``runner_error``) of a gateway command."""
    return CommandError.of(codes.RUNNER_ERROR, message)


@dataclass
class OwnedSession:
    profile: str
    stored_id: str | None
    running: bool = False


class Channel:
    """One gateway: a Hermes WebSocket, its owned sessions, its ordered event poster."""

    def __init__(self, connection_id: str, cleanup_only: bool, registry: Registry) -> None:
        self.id = connection_id
        self.cleanup_only = cleanup_only
        self.sessions: dict[str, OwnedSession] = {}
        self.closed = False
        self._registry = registry
        self._ws: aiohttp.ClientWebSocketResponse | None = None
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future[Any]] = {}
        self._on_result: dict[int, Callable[[Any], None]] = {}
        self._events: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
        self._tasks: list[asyncio.Task[None]] = []
        self._closing: asyncio.Future[None] | None = None

    async def connect(self, hermes: HermesClient) -> None:
        ws = await hermes.ws_connect()
        if self.closed:  # a close overtook the handshake: never revive
            await ws.close()
            raise plain_error("gateway closed before it opened")
        self._ws = ws
        self._tasks = [asyncio.create_task(self._read()), asyncio.create_task(self._post())]

    async def call(self, method: str, params: dict[str, Any],
                   on_result: Callable[[Any], None] | None = None) -> Any:
        """Send one request and await its reply. ``on_result`` runs in the reader, in wire
        order, before any later frame is read (session ownership must be in place before the
        event that may follow the reply on the wire)."""
        if self.closed or self._ws is None:
            raise CommandError.of(codes.CONNECTION_CLOSED)
        rid = next(self._ids)
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[rid] = fut
        if on_result is not None:
            self._on_result[rid] = on_result
        try:
            await self._ws.send_str(json.dumps(
                {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}))
            return await fut
        except (aiohttp.ClientError, ConnectionError, RuntimeError):
            raise CommandError.of(codes.CONNECTION_CLOSED) from None
        finally:
            self._pending.pop(rid, None)
            self._on_result.pop(rid, None)

    async def _read(self) -> None:
        assert self._ws is not None
        try:
            async for msg in self._ws:
                if msg.type != aiohttp.WSMsgType.TEXT:
                    continue
                try:
                    frame = json.loads(msg.data)
                except (ValueError, RecursionError):
                    continue
                if isinstance(frame, dict):
                    self._on_frame(frame)
        except Exception:  # noqa: BLE001 - a broken socket is a closed channel
            pass
        if not self.closed:
            self._fail_pending()
            self._events.put_nowait({"connectionId": self.id, "closed": True})
            self._events.put_nowait(None)
            self._registry.forget(self.id)

    def _on_frame(self, frame: dict[str, Any]) -> None:
        rid = frame.get("id")
        if isinstance(rid, int) and rid in self._pending and ("result" in frame or "error" in frame):
            fut = self._pending[rid]
            if fut.done():
                return
            if "error" in frame:
                err = frame["error"] if isinstance(frame["error"], dict) else {}
                text = err.get("message")
                msg = text if isinstance(text, str) else "Hermes error"
                fut.set_exception(CommandError.of(codes.HERMES_RPC_ERROR,
                                                   msg[: timings.ERROR_TEXT_CAP]))
            else:
                result = frame.get("result")
                hook = self._on_result.pop(rid, None)
                if hook is not None and not self.closed:
                    hook(result)   # e.g. the session is this channel's before the next frame
                fut.set_result(result)
            return
        if frame.get("method") != "event" or not isinstance(frame.get("params"), dict):
            return
        params = frame["params"]
        sid = params.get("session_id")
        owned = self.sessions.get(sid) if isinstance(sid, str) else None
        if owned is None or not isinstance(params.get("type"), str):
            return  # only owned sessions' frames leave this machine
        if params["type"] in COMPLETION_EVENTS:
            owned.running = False
        elif params["type"] in START_EVENTS:
            owned.running = True
        elif params["type"] == "session.info":
            payload = params.get("payload") if isinstance(params.get("payload"), dict) else {}
            if payload.get("running") is True:
                owned.running = True
            stored = payload.get("stored_session_id")
            if isinstance(stored, str) and stored:
                owned.stored_id = stored
                self._registry.session_info(sid, stored)
        self._events.put_nowait({"connectionId": self.id, "frame": params})

    async def _post(self) -> None:
        while True:
            body = await self._events.get()
            if body is None:
                return
            try:
                await self._registry.post_event(body)
            except ServerError as exc:
                if body.get("closed"):
                    return
                if exc.status == 410:
                    self._registry.close_later(self.id)
                else:
                    self._registry.on_fatal()
                return

    def _fail_pending(self) -> None:
        for fut in self._pending.values():
            if not fut.done():
                fut.set_exception(CommandError.of(codes.CONNECTION_CLOSED))

    async def close(self) -> None:
        """Interrupt running sessions (≤ INTERRUPT_WAIT), then close the socket. A second
        close (a gateway.close overtaking a 410, say) waits for the first one to finish."""
        if self._closing is None:
            if self.closed:
                return
            self._closing = asyncio.ensure_future(self._close())
        await asyncio.shield(self._closing)

    async def _close(self) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timings.INTERRUPT_WAIT   # one budget for interrupts + close
        running = [sid for sid, s in self.sessions.items() if s.running]
        if running and self._ws is not None and not self._ws.closed:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.gather(
                    *(self.call("session.interrupt", {"session_id": sid}) for sid in running),
                    return_exceptions=True), timings.INTERRUPT_WAIT)
        self.closed = True
        self._fail_pending()
        self._events.put_nowait(None)
        ws = self._ws
        if ws is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(ws.close(),
                                       max(timings.CLOSE_GRACE, deadline - loop.time()))
        for t in self._tasks:
            if t is not asyncio.current_task():
                t.cancel()
