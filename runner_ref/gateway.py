"""Gateway channels: one Hermes WebSocket per ``connectionId`` (protocol 1 §3 gateway.*).

Rules:
- ``gateway.open``: a malformed, duplicate or tomb-stoned id, or a 65th channel, is refused
  (``runner_error``); ``computer`` channels are unavailable here (409 ``computer_unavailable``).
  The channel is registered *before* the WebSocket handshake, so a ``gateway.close`` that
  overtakes the open wins: the late handshake is closed and never revives the channel.
- ``gateway.rpc``: the allowlist (:mod:`runner_ref.allowlists`); create/resume need the profile;
  every other method needs a ``session_id`` this channel owns; ``session.active_list`` takes
  exactly ``{profile, current_session_id}`` and answers only that session's ``{id, status}``.
  A JSON-RPC error from Hermes becomes ``hermes_rpc_error`` with Hermes' message (≤1000 chars).
  A channel closed during create/resume → 409 ``runner_command_uncertain``.
- A session is the channel's from the moment the reader reads its create/resume reply (in wire
  order, before the next frame), so an event right behind the reply is forwarded.
- Events: only frames of sessions this channel owns are forwarded, in order, as the ``params``
  of the Hermes ``event`` notification; ``message.complete`` clears the running state;
  ``session.info`` updates stored ids (and tells the leases). A 410 on ``event`` closes just this
  channel; any other posting failure disconnects the runner. When Hermes closes the socket the
  runner posts ``{connectionId, closed: true}``.
- ``gateway.close``: tombstone for 60 s, dispose the channel's leases, interrupt running sessions
  (waiting at most 3 s), close the socket, ``{ok: true}``. Unknown ids close fine (idempotent).
The connection-id format, the 64-channel limit, the 60 s tombstones and the session ownership
rules are also the control plane's; they are written independently in fake_server on purpose.
"""
from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

import aiohttp

from . import codes, timings
from .allowlists import PROFILE_METHODS, check_rpc_method, require_profile
from .errors import CommandError, ServerError
from .hermes import HermesClient

CONNECTION_ID_RE = re.compile(r"^[A-Za-z0-9_.:-]{1,200}$")
ACTIVE_LIST_KEYS = frozenset({"profile", "current_session_id"})
COMPLETION_EVENTS = frozenset({"message.complete"})


class LeaseHooks(Protocol):
    async def dispose_channel(self, connection_id: str) -> None: ...
    def on_session_info(self, runtime_id: str, stored_id: str) -> None: ...


PostEvent = Callable[[dict[str, Any]], Awaitable[Any]]


def _plain(message: str) -> CommandError:
    return CommandError.of(codes.RUNNER_ERROR, message)


def _session_forbidden() -> CommandError:
    return CommandError.of(codes.SESSION_FORBIDDEN)




@dataclass
class OwnedSession:
    profile: str
    stored_id: str | None
    running: bool = False


class Channel:
    """One gateway: a Hermes WebSocket, its owned sessions, its ordered event poster."""

    def __init__(self, connection_id: str, cleanup_only: bool, registry: Gateways) -> None:
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
            raise _plain("gateway closed before it opened")
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
        elif params["type"] == "session.info":
            payload = params.get("payload") if isinstance(params.get("payload"), dict) else {}
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


class Gateways:
    """The channel registry (implements the team tools' ``SessionDirectory``)."""

    def __init__(self, hermes: HermesClient, allowed_profiles: tuple[str, ...],
                 post_event: PostEvent, on_fatal: Callable[[], None],
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.hermes = hermes
        self.allowed_profiles = allowed_profiles
        self.post_event = post_event
        self.on_fatal = on_fatal
        self.leases: LeaseHooks | None = None
        self.channels: dict[str, Channel] = {}
        self._tombstones: dict[str, float] = {}
        self._closing: dict[str, Channel] = {}   # channels whose close is in progress
        self._background: set[asyncio.Task[None]] = set()   # closes started by a 410
        self._clock = clock

    # -- SessionDirectory ----------------------------------------------------------------
    def owner_of(self, runtime_id: str) -> tuple[str, str] | None:
        found = self._owned(runtime_id)
        return (found[0].id, found[1].profile) if found else None

    def stored_id(self, runtime_id: str) -> str | None:
        found = self._owned(runtime_id)
        return found[1].stored_id if found else None

    def _owned(self, runtime_id: str) -> tuple[Channel, OwnedSession] | None:
        """The open channel that owns ``runtime_id``, and its session."""
        for ch in self.channels.values():
            s = ch.sessions.get(runtime_id)
            if s is not None and not ch.closed:
                return ch, s
        return None

    # -- internals ------------------------------------------------------------------------
    def session_info(self, runtime_id: str, stored_id: str) -> None:
        if self.leases is not None:
            with contextlib.suppress(Exception):
                self.leases.on_session_info(runtime_id, stored_id)

    def forget(self, connection_id: str) -> None:
        self.channels.pop(connection_id, None)
        self._tombstone(connection_id)

    def _tombstone(self, connection_id: str) -> None:
        now = self._clock()
        for k in [k for k, exp in self._tombstones.items() if exp <= now]:
            del self._tombstones[k]
        self._tombstones[connection_id] = now + timings.TOMBSTONE_TTL

    def is_tombstoned(self, connection_id: str) -> bool:
        exp = self._tombstones.get(connection_id)
        return exp is not None and exp > self._clock()

    # -- kinds ------------------------------------------------------------------------------
    async def open(self, payload: dict[str, Any]) -> dict[str, Any]:
        cid = payload.get("connectionId")
        if payload.get("computer") is not None:
            raise CommandError.of(codes.COMPUTER_UNAVAILABLE)
        if not isinstance(cid, str) or not CONNECTION_ID_RE.match(cid):
            raise _plain("malformed connection id")
        if self.is_tombstoned(cid):
            raise _plain("connection id was closed")
        if cid in self.channels:
            raise _plain("connection id already open")
        if len(self.channels) >= timings.MAX_CHANNELS:
            raise _plain("too many channels")
        ch = Channel(cid, payload.get("cleanupOnly") is True, self)
        self.channels[cid] = ch
        try:
            await ch.connect(self.hermes)
        except BaseException:
            if self.channels.get(cid) is ch:
                del self.channels[cid]
            raise
        return {"ok": True}

    async def close_channel(self, connection_id: str) -> None:
        self._tombstone(connection_id)
        ch = self.channels.pop(connection_id, None) or self._closing.get(connection_id)
        if self.leases is not None:
            with contextlib.suppress(Exception):
                await self.leases.dispose_channel(connection_id)
        if ch is not None:
            await self._close_tracked(ch)

    def close_later(self, connection_id: str) -> None:
        """Close one channel in the background (its own poster cannot await its close); the
        task is kept until done and awaited by :meth:`close_all`."""
        task = asyncio.create_task(self.close_channel(connection_id))
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _close_tracked(self, ch: Channel) -> None:
        """Close ``ch``; while it closes, a gateway.close for its id waits for it."""
        self._closing[ch.id] = ch
        try:
            await ch.close()
        finally:
            if self._closing.get(ch.id) is ch:
                del self._closing[ch.id]

    async def close(self, payload: dict[str, Any]) -> dict[str, Any]:
        cid = payload.get("connectionId")
        if not isinstance(cid, str) or not CONNECTION_ID_RE.match(cid):
            raise _plain("malformed connection id")
        await self.close_channel(cid)
        return {"ok": True}

    async def close_all(self) -> None:
        """Local disconnect: every channel closes (sessions interrupted, ≤3 s in parallel)."""
        chans = list(self.channels.values())
        self.channels.clear()
        for ch in chans:
            self._tombstone(ch.id)
        await asyncio.gather(*(self._close_tracked(ch) for ch in chans),
                             *list(self._background), return_exceptions=True)

    async def rpc(self, payload: dict[str, Any]) -> Any:
        cid = payload.get("connectionId")
        ch = self.channels.get(cid) if isinstance(cid, str) else None
        if ch is None or ch.closed:
            raise CommandError.of(codes.CONNECTION_CLOSED, "gateway is not open")
        method = check_rpc_method(payload.get("method"), ch.cleanup_only)
        params = payload.get("params", {})
        if params is None:
            params = {}
        if not isinstance(params, dict):
            raise _plain("params must be an object")
        if method == "session.active_list":
            return await self._active_list(ch, params)
        if method in PROFILE_METHODS:
            return await self._open_session(ch, method, params)
        sid = params.get("session_id")
        if not isinstance(sid, str) or sid not in ch.sessions:
            raise _session_forbidden()
        if method == "prompt.submit":
            # running from the moment the prompt is sent: a close that overtakes the reply
            # still interrupts, and a turn whose message.complete beats the reply ends idle
            ch.sessions[sid].running = True
        result = await ch.call(method, params)
        if method == "session.close":
            ch.sessions.pop(sid, None)
        return result

    async def _open_session(self, ch: Channel, method: str, params: dict[str, Any]) -> Any:
        profile = require_profile(params.get("profile"), self.allowed_profiles)

        def own(result: Any) -> None:
            # runs in the channel's reader as the reply is read, so an event right behind the
            # reply on the wire (Hermes sends session.info at once) already finds its owner
            if isinstance(result, dict) and isinstance(result.get("session_id"), str):
                stored = result.get("stored_session_id") or result.get("resumed") or (
                    params.get("session_id") if method == "session.resume" else None)
                ch.sessions[result["session_id"]] = OwnedSession(
                    profile=profile, stored_id=stored if isinstance(stored, str) else None,
                    running=result.get("running") is True)

        try:
            result = await ch.call(method, params, on_result=own)
        except CommandError as exc:
            if exc.code != codes.CONNECTION_CLOSED.code:
                raise
            # sent, then the channel closed: the session may exist in Hermes (§3.3)
            raise CommandError.of(codes.COMMAND_UNCERTAIN, "channel closed during the call") \
                from None
        if ch.closed or self.channels.get(ch.id) is not ch:
            raise CommandError.of(codes.COMMAND_UNCERTAIN, "channel closed during the call")
        return result

    async def _active_list(self, ch: Channel, params: dict[str, Any]) -> Any:
        sid = params.get("current_session_id")
        if set(params) != ACTIVE_LIST_KEYS or not isinstance(sid, str) or sid not in ch.sessions:
            raise _session_forbidden()
        result = await ch.call("session.active_list", params)
        items = result.get("sessions") if isinstance(result, dict) else result
        if not isinstance(items, list):
            raise CommandError.of(codes.SESSION_STOP_UNCONFIRMED)
        mine = [{"id": sid, "status": it.get("status")} for it in items
                if isinstance(it, dict) and sid in (it.get("id"), it.get("session_id"))]
        return {"sessions": mine}
