"""Negative controls for the cases of a channel's running sessions and in-flight requests
(``conformance/cases/test_spec_extra_channels.py``, protocol 1 §3.2, §3.3): one realistic bug
each."""
from __future__ import annotations

import asyncio
import json
from typing import Any

from .control import Control, const


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


def _bind_once(orig: Any) -> Any:
    from runner_ref import codes
    from runner_ref.errors import CommandError
    from runner_ref.teamtools import leases as L

    async def _bind(self: Any, lease: Any) -> None:
        async with lease.bind_lock:
            first = not lease.bound
            lease.expires_at = self._clock() + self.ttl
            body = self._bind_body(lease)
            lease.bind_sent = True
            try:
                status, reply = await asyncio.wait_for(
                    self._plugin.post_json(L.BIND_PATH, body), self._plugin_timeout)
            except Exception:
                status, reply = 0, None
            if lease.state is L.State.DISPOSED:
                await self._unbind(lease)
                raise L._expired()
            if status != 200 or not isinstance(reply, dict) or reply.get("ok") is not True:
                raise CommandError.of(codes.TEAM_TOOLS_BIND_FAILED)
            if first and reply.get("native_tools") is not True:
                raise CommandError.of(codes.TEAM_TOOLS_UNAVAILABLE)
            lease.bound = True   # one bind; a stored id changed meanwhile waits for the re-check
            lease.next_renew = self._clock() + self.renew_every
    return _bind


CONTROLS += (
    Control("bind-once-in-flight", "team-tools",
            "Binds once: a stored session id that changed while the bind was in flight is left "
            "to the next 5-min re-check.",
            "a check-then-act window: the plugin holds tools bound to a stored session Hermes "
            "has already rotated away from, for up to 5 min",
            "runner_ref.teamtools.leases:LeaseManager._bind", ("TT-909",), _bind_once),
)


def _connected_only_after_reset(orig: Any) -> Any:
    async def _take_answer(self: Any, body: dict[str, Any], reset: bool) -> None:
        changed = self.machine.epoch is not None and body.get("epoch") != self.machine.epoch
        if reset:
            self._nc_lost = False
        elif changed:
            self._nc_lost = True   # the epoch change cleared the flag; only a reset poll sets it
        await orig(self, body, reset)
        if getattr(self, "_nc_lost", False):
            self._connected = False
    return _take_answer


CONTROLS += (
    Control("connected-only-after-reset", "generations",
            "After a new epoch arrives on a normal poll it disconnects locally and stays "
            "disconnected: every command of the new epoch is answered \"runner is "
            "disconnected\" until some poll fails.",
            "a 'connected' flag set on one path (the reset poll) and cleared on another (the "
            "epoch change); the reference runner had this bug until GEN-004 was made "
            "deterministic",
            "runner_ref.poll_loop:PollLoop._take_answer", ("GEN-004",),
            _connected_only_after_reset),
)


CONTROLS += (
    Control("keep-alive-websocket", "wire",
            "Keeps HTTP connections to Hermes alive, so a gateway WebSocket is upgraded on a "
            "connection that just carried an HTTP request.",
            "an HTTP client's default connection pool: against Hermes 0.19.0 (uvicorn) the "
            "finished request's keep-alive timer can close the WebSocket 5 s after it opened — "
            "the reference runner lost real first turns this way",
            "runner_ref.hermes:KEEP_ALIVE", ("WIR-907",), const(True)),
)
