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
  order, before the next frame), so an event right behind the reply is forwarded; the channel
  itself (socket, ordered events, close) is :mod:`runner_ref.gateway_channel`.
- ``session.info`` updates stored ids and tells the leases.
- ``gateway.close``: tombstone for 60 s, dispose the channel's leases, interrupt running sessions
  (waiting at most 3 s), close the socket, ``{ok: true}``. Unknown ids close fine (idempotent).
The connection-id format, the 64-channel limit, the 60 s tombstones and the session ownership
rules are also the control plane's; they are written independently in fake_server on purpose.
"""
from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections.abc import Callable
from typing import Any, Protocol

from . import codes, timings
from .allowlists import PROFILE_METHODS, check_rpc_method, require_profile
from .errors import CommandError
from .gateway_channel import Channel, OwnedSession, PostEvent, plain_error
from .hermes import HermesClient

CONNECTION_ID_RE = re.compile(r"^[A-Za-z0-9_.:-]{1,200}$")
ACTIVE_LIST_KEYS = frozenset({"profile", "current_session_id"})


class LeaseHooks(Protocol):
    async def dispose_channel(self, connection_id: str) -> None: ...
    def on_session_info(self, runtime_id: str, stored_id: str) -> None: ...


def _session_forbidden() -> CommandError:
    return CommandError.of(codes.SESSION_FORBIDDEN)


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
            raise plain_error("malformed connection id")
        if self.is_tombstoned(cid):
            raise plain_error("connection id was closed")
        if cid in self.channels:
            raise plain_error("connection id already open")
        if len(self.channels) >= timings.MAX_CHANNELS:
            raise plain_error("too many channels")
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
            raise plain_error("malformed connection id")
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
            raise plain_error("params must be an object")
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
