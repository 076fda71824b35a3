"""Negative controls of gateway channels and leases: cancel races and session isolation."""
from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

import aiohttp

from runner_ref import codes, timings
from runner_ref.allowlists import check_rpc_method
from runner_ref.errors import CommandError
from runner_ref.gateway import CONNECTION_ID_RE, Channel, OwnedSession
from runner_ref.teamtools.leases import _lease_id

from .control import Control, const

GW = "runner_ref.gateway"


# -- cancel ---------------------------------------------------------------------------------
def _close_waits(orig: Any) -> Any:
    async def close(self: Any) -> None:
        pending = [f for f in self._pending.values() if not f.done()]
        if pending:   # "graceful": let in-flight requests finish first
            await asyncio.wait(pending)
        await orig(self)
    return close


def _register_after_handshake(orig: Any) -> Any:
    async def open(self: Any, payload: dict[str, Any]) -> dict[str, Any]:
        cid = payload.get("connectionId")
        if payload.get("computer") is not None:
            raise CommandError.of(codes.COMPUTER_UNAVAILABLE)
        if not isinstance(cid, str) or not CONNECTION_ID_RE.match(cid):
            raise CommandError.of(codes.RUNNER_ERROR, "malformed connection id")
        if self.is_tombstoned(cid) or cid in self.channels:
            raise CommandError.of(codes.RUNNER_ERROR, "connection id not available")
        if len(self.channels) >= timings.MAX_CHANNELS:
            raise CommandError.of(codes.RUNNER_ERROR, "too many channels")
        ch = Channel(cid, payload.get("cleanupOnly") is True, self)
        await ch.connect(self.hermes)
        self.channels[cid] = ch   # registered once connected: a close meanwhile found nothing
        return {"ok": True}
    return open


def _close_without_interrupt(orig: Any) -> Any:
    async def _close(self: Any) -> None:
        self.closed = True
        self._fail_pending()
        self._events.put_nowait(None)
        if self._ws is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._ws.close(), timings.CLOSE_GRACE)
        for t in self._tasks:
            if t is not asyncio.current_task():
                t.cancel()
    return _close


def _close_unknown_fails(orig: Any) -> Any:
    async def close(self: Any, payload: dict[str, Any]) -> dict[str, Any]:
        cid = payload.get("connectionId")
        if cid not in self.channels and cid not in self._closing:
            raise CommandError.of(codes.CONNECTION_CLOSED, "no such gateway")
        return await orig(self, payload)   # type: ignore[no-any-return]
    return close


def _interrupt_locally(orig: Any) -> Any:
    async def rpc(self: Any, payload: dict[str, Any]) -> Any:
        ch = self.channels.get(payload.get("connectionId"))
        raw = payload.get("params")
        params: dict[str, Any] = raw if isinstance(raw, dict) else {}
        sid = params.get("session_id")
        if payload.get("method") == "session.interrupt" and ch is not None and sid in ch.sessions:
            ch.sessions[sid].running = False   # marked stopped here, Hermes never told
            return {"ok": True}
        return await orig(self, payload)
    return rpc


def _lease_close_unknown_noop(orig: Any) -> Any:
    async def close(self: Any, payload: dict[str, Any]) -> dict[str, Any]:
        lease = self.lease(_lease_id(payload))
        if lease is None:
            return {"ok": True}   # nothing to close, nothing remembered
        return await orig(self, payload)   # type: ignore[no-any-return]
    return close


# -- isolation ------------------------------------------------------------------------------
def _on_frame(forward_foreign: bool, forward_sessionless: bool) -> Any:
    def make(orig: Any) -> Any:
        def _on_frame(self: Any, frame: dict[str, Any]) -> None:
            params = frame.get("params")
            if "id" in frame and ("result" in frame or "error" in frame) \
                    or frame.get("method") != "event" or not isinstance(params, dict):
                return orig(self, frame)   # type: ignore[no-any-return]
            sid = params.get("session_id")
            if isinstance(sid, str) and sid in self.sessions:
                return orig(self, frame)   # type: ignore[no-any-return]
            if (isinstance(sid, str) and forward_foreign) or (
                    not isinstance(sid, str) and forward_sessionless):
                self._events.put_nowait({"connectionId": self.id, "frame": params})
            return None
        return _on_frame
    return make


def _rpc(ownership: str) -> Any:
    """``ownership``: "none" (any session id) or "runner" (owned by any channel)."""
    def make(orig: Any) -> Any:
        async def rpc(self: Any, payload: dict[str, Any]) -> Any:
            ch = self.channels.get(payload.get("connectionId"))
            method = payload.get("method")
            params = payload.get("params") or {}
            if ch is None or ch.closed or not isinstance(params, dict) \
                    or method in ("session.active_list", "session.create", "session.resume"):
                return await orig(self, payload)
            check_rpc_method(method, ch.cleanup_only)
            sid = params.get("session_id")
            if not isinstance(sid, str) or (ownership == "runner" and self._owned(sid) is None):
                raise CommandError.of(codes.SESSION_FORBIDDEN)
            owned = ch.sessions.get(sid)
            if method == "prompt.submit" and owned is not None:
                owned.running = True
            result = await ch.call(method, params)
            if method == "session.close":
                ch.sessions.pop(sid, None)
            return result
        return rpc
    return make


def _late_ownership(orig: Any) -> Any:
    from runner_ref.gateway import require_profile

    async def _open_session(self: Any, ch: Any, method: str, params: dict[str, Any]) -> Any:
        profile = require_profile(params.get("profile"), self.allowed_profiles)
        result = await ch.call(method, params)   # ownership only once this coroutine resumes
        if isinstance(result, dict) and isinstance(result.get("session_id"), str):
            stored = result.get("stored_session_id") or result.get("resumed")
            ch.sessions[result["session_id"]] = OwnedSession(
                profile=profile, stored_id=stored if isinstance(stored, str) else None,
                running=result.get("running") is True)
        if ch.closed or self.channels.get(ch.id) is not ch:
            raise CommandError.of(codes.COMMAND_UNCERTAIN, "channel closed during the call")
        return result
    return _open_session


def _no_closed_notice(orig: Any) -> Any:
    async def _read(self: Any) -> None:
        import json
        try:
            async for msg in self._ws:
                if msg.type == aiohttp.WSMsgType.TEXT:
                    with contextlib.suppress(ValueError, RecursionError):
                        frame = json.loads(msg.data)
                        if isinstance(frame, dict):
                            self._on_frame(frame)
        except Exception:  # noqa: BLE001
            pass
        if not self.closed:   # the socket ended: forgotten quietly, nobody is told
            self._fail_pending()
            self._events.put_nowait(None)
            self._registry.forget(self.id)
    return _read


def _fatal_on_410(orig: Any) -> Any:
    def close_later(self: Any, connection_id: str) -> None:
        self.on_fatal()   # any event-post failure disconnects the whole runner
    return close_later


# -- running at message.start, no resend after a drop ---------------------------------------
def _call_retrying(orig: Any) -> Any:
    async def call(self: Any, method: str, params: dict[str, Any], on_result: Any = None) -> Any:
        try:
            return await orig(self, method, params, on_result)
        except Exception as exc:
            if getattr(exc, "code", None) != "runner_connection_closed" or self._ws is None:
                raise
        # "the connection dropped before the reply: retry once on a fresh socket"
        ws = await self._registry.hermes.ws_connect()
        try:
            await ws.send_str(json.dumps(
                {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}))
            async for msg in ws:
                frame = json.loads(msg.data) if isinstance(msg.data, str) else {}
                if isinstance(frame, dict) and frame.get("id") == 1:
                    if "result" in frame:
                        return frame["result"]
                    raise exc_from(frame)
        finally:
            await ws.close()
        raise RuntimeError("retry socket closed")
    return call


def exc_from(frame: dict[str, Any]) -> Exception:
    err = frame.get("error")
    text = err.get("message") if isinstance(err, dict) else None
    return RuntimeError(str(text or "Hermes error"))


CONTROLS: tuple[Control, ...] = (
    Control("close-waits-for-rpc", "cancel",
            "gateway.close waits for the channel's in-flight RPCs before closing.",
            "a 'graceful' close that a hung request blocks forever (stuck cancellation)",
            f"{GW}:Channel.close", ("CAN-002",), _close_waits),
    Control("close-overtaken-open-survives", "cancel",
            "Registers a channel only after its Hermes handshake, so an overtaking close is lost.",
            "cancel racing create: the resource appears after its cancellation",
            f"{GW}:Gateways.open", ("CAN-001",), _register_after_handshake),
    Control("no-tombstone", "cancel",
            "Forgets closed connection ids at once, so a late gateway.open reopens one.",
            "a reordered open after close revives a cancelled channel",
            f"{GW}:Gateways._tombstone",
            ("CAN-004", "PROP-006"), lambda _orig: lambda self, cid: None),
    Control("no-interrupt-on-close", "cancel",
            "Closes a channel's socket without interrupting its running sessions.",
            "cancelled work that keeps running in Hermes after its channel is gone",
            f"{GW}:Channel._close", ("CAN-003", "CFG-010"), _close_without_interrupt),
    Control("close-unknown-fails", "cancel",
            "gateway.close of an id it does not hold (a failed open) answers an error.",
            "non-idempotent cancellation: the cleanup step itself fails",
            f"{GW}:Gateways.close", ("CAN-011",), _close_unknown_fails),
    Control("interrupt-acked-locally", "cancel",
            "Answers session.interrupt itself without sending it to Hermes.",
            "an optimistic stop: the UI shows stopped while the turn runs on",
            f"{GW}:Gateways.rpc", ("CAN-008",), _interrupt_locally),
    Control("lease-close-unknown-noop", "cancel",
            "lease.close of a lease not created yet does nothing, so the create then succeeds.",
            "a close that overtakes its create is lost (the grant outlives its revocation)",
            "runner_ref.teamtools.leases:LeaseManager.close", ("CAN-005",),
            _lease_close_unknown_noop),
    Control("no-lease-tombstone", "cancel",
            "Forgets closed lease ids at once, so a late lease.create reuses one.",
            "a revoked tool grant revived by a reordered create",
            "runner_ref.teamtools.leases:LeaseManager._tombstone", ("CAN-007", "PROP-006"),
            lambda _orig: lambda self, lease_id: None),
    Control("forward-foreign-events", "isolation",
            "Forwards every session's events on the channel, owned or not.",
            "cross-tenant event leak through a shared Hermes socket",
            f"{GW}:Channel._on_frame", ("ISO-001", "WIR-013"), _on_frame(True, False)),
    Control("forward-sessionless-frames", "isolation",
            "Forwards event frames that carry no session_id.",
            "global Hermes notifications leaking to every tenant",
            f"{GW}:Channel._on_frame", ("ISO-008",), _on_frame(False, True)),
    Control("no-session-ownership-check", "isolation",
            "Runs an RPC on any session id, owned or not.",
            "insecure direct object reference: act on another tenant's session by id",
            f"{GW}:Gateways.rpc", ("ISO-002", "ISO-003"), _rpc("none")),
    Control("runner-wide-session-ownership", "isolation",
            "Checks that a session belongs to the runner, not to the channel that names it.",
            "ownership checked at the wrong level: channel A steers channel B's session",
            f"{GW}:Gateways.rpc", ("ISO-002",), _rpc("runner")),
    Control("late-session-ownership", "isolation",
            "Takes ownership of a new session only after the awaiting coroutine resumes.",
            "the race the reference fixed: session.info right behind the reply is dropped",
            f"{GW}:Gateways._open_session", ("ISO-005",), _late_ownership),
    Control("resume-not-owned", "isolation",
            "Treats session.resume like any other method, so resumed sessions are never owned.",
            "ownership only for sessions it created (resume after a restart breaks)",
            f"{GW}:PROFILE_METHODS", ("ISO-009",),
            lambda _orig: frozenset({"session.create"})),
    Control("no-closed-notice", "isolation",
            "Drops a channel quietly when Hermes closes its socket.",
            "a dead session the control plane still shows as live (stale sessions)",
            f"{GW}:Channel._read", ("ISO-007",), _no_closed_notice),
    Control("disconnect-on-410", "isolation",
            "A 410 on one channel's event disconnects the whole runner.",
            "one revoked channel takes every other tenant's channel down",
            f"{GW}:Gateways.close_later", ("ISO-010",), _fatal_on_410),
    Control("unbounded-close-interrupts", "cancel",
            "gateway.close waits up to 60 s for the interrupt replies before it closes.",
            "a hung dependency blocking cleanup (a close that never completes)",
            "runner_ref.timings:INTERRUPT_WAIT", ("CAN-901",), const(60.0)),
    Control("running-never-cleared", "isolation",
            "Never clears a session's running flag on message.complete.",
            "stale busy state: idle sessions interrupted at every close and stop",
            "runner_ref.gateway_channel:COMPLETION_EVENTS", ("ISO-901",), const(frozenset())),
    Control("running-only-at-submit", "isolation",
            "Marks a session running only at its own prompt.submit; message.start does not.",
            "state tracked from the runner's own requests only: a turn Hermes starts by itself "
            "(a queued prompt) is invisible, so a close leaves it running",
            "runner_ref.gateway_channel:START_EVENTS", ("ISO-902",), const(frozenset()),
            rebind=True),
    Control("resend-after-drop", "cancel",
            "Re-sends a request whose channel closed before the reply, on a fresh Hermes socket.",
            "at-least-once delivery in a reconnecting client: a prompt Hermes already holds is "
            "submitted twice",
            "runner_ref.gateway_channel:Channel.call", ("CAN-903",), _call_retrying),
)
