"""Probes of the gateway controls (cancel races, session isolation):
``negative_controls/controls_gateway.py`` (see ``nc_probes.py``)."""
from __future__ import annotations

import asyncio
import uuid
from types import SimpleNamespace as NS
from typing import Any

from tests.negative_controls.nc_probes import _gateways, _leases, _yield, probe


def _channel(cid: str = "c1", sessions: tuple[str, ...] = (), running: bool = False) -> Any:
    from runner_ref.gateway import Channel, OwnedSession
    ch: Any = Channel(cid, False, NS(forget=lambda cid: None))  # type: ignore[arg-type]
    ch.sessions = {s: OwnedSession("default", None, running) for s in sessions}
    ch.sent = []

    async def call(method: str, params: Any, on_result: Any = None) -> Any:
        ch.sent.append(method)
        return {"ok": True}
    ch.call = call
    return ch


@probe("close-waits-for-rpc")
async def _close_waits() -> bool:
    ch = _channel()
    held: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
    ch._pending[1] = held
    task = asyncio.ensure_future(ch.close())
    await _yield()
    blocked = not task.done()
    if not held.done():
        held.set_result(None)
    await task
    if held.done() and not held.cancelled():
        held.exception()
    return blocked


@probe("close-overtaken-open-survives")
async def _register_late() -> bool:
    from runner_ref.errors import CommandError
    release = asyncio.Event()

    async def ws_connect() -> Any:
        await release.wait()
        raise CommandError("hermes_unavailable", "probe", 502)
    g = _gateways(hermes=NS(ws_connect=ws_connect))
    task = asyncio.ensure_future(g.open({"connectionId": "c1"}))
    await _yield()
    registered = "c1" in g.channels
    release.set()
    await asyncio.gather(task, return_exceptions=True)
    return not registered


@probe("no-tombstone")
def _tombstone() -> bool:
    g = _gateways()
    g._tombstone("c1")
    return not g.is_tombstoned("c1")


class _FakeWS:
    closed = False

    async def close(self) -> None:
        self.closed = True

    def __aiter__(self) -> Any:
        return self

    async def __anext__(self) -> Any:
        raise StopAsyncIteration


@probe("no-interrupt-on-close")
async def _no_interrupt() -> bool:
    ch = _channel(sessions=("s1",), running=True)
    ch._ws = _FakeWS()
    await ch._close()
    return "session.interrupt" not in ch.sent


@probe("close-unknown-fails")
async def _close_unknown() -> bool:
    g = _gateways()
    try:
        await g.close({"connectionId": "never-opened"})
    except Exception:  # noqa: BLE001
        return True
    return False


@probe("interrupt-acked-locally")
async def _interrupt_local() -> bool:
    g = _gateways()
    ch = _channel(sessions=("s1",), running=True)
    ch._ws = _FakeWS()
    g.channels["c1"] = ch
    await g.rpc({"connectionId": "c1", "method": "session.interrupt",
                 "params": {"session_id": "s1"}})
    return "session.interrupt" not in ch.sent


@probe("lease-close-unknown-noop")
async def _lease_close() -> bool:
    lm = _leases()
    lease_id = str(uuid.uuid4())
    await lm.close({"leaseId": lease_id})
    return not lm.is_tombstoned(lease_id)


@probe("no-lease-tombstone")
def _lease_tombstone() -> bool:
    lm = _leases()
    lease_id = str(uuid.uuid4())
    lm._tombstone(lease_id)
    return not lm.is_tombstoned(lease_id)


def _forwards(params: dict[str, Any]) -> bool:
    ch = _channel(sessions=("s1",))
    ch._on_frame({"jsonrpc": "2.0", "method": "event", "params": params})
    return ch._events.qsize() > 0


probe("forward-foreign-events")(
    lambda: _forwards({"session_id": "s2", "type": "message.delta", "payload": {}}))


probe("forward-sessionless-frames")(lambda: _forwards({"type": "gateway.ready", "payload": {}}))


async def _rpc_on(naming: str) -> bool:
    g = _gateways()
    mine, other = _channel("c1"), _channel("c2", sessions=("s2",))
    mine._ws = other._ws = _FakeWS()
    g.channels.update({"c1": mine, "c2": other})
    try:
        await g.rpc({"connectionId": "c1", "method": "session.usage",
                     "params": {"session_id": naming}})
    except Exception:  # noqa: BLE001 - refused
        return False
    return True


@probe("no-session-ownership-check")
async def _no_owner() -> bool:
    return await _rpc_on("never-created")


@probe("runner-wide-session-ownership")
async def _runner_wide() -> bool:
    return await _rpc_on("s2")


@probe("late-session-ownership")
async def _late_owner() -> bool:
    g = _gateways()
    ch = _channel()
    ch._ws = _FakeWS()
    g.channels["c1"] = ch
    owned_when_read: list[bool] = []

    async def call(method: str, params: Any, on_result: Any = None) -> Any:
        result = {"session_id": "s1"}
        if on_result is not None:
            on_result(result)
        owned_when_read.append("s1" in ch.sessions)   # the reader reads the next frame now
        return result
    ch.call = call
    await g.rpc({"connectionId": "c1", "method": "session.create",
                 "params": {"profile": "default"}})
    return owned_when_read == [False]


@probe("resume-not-owned")
def _resume() -> bool:
    from runner_ref import gateway
    return "session.resume" not in gateway.PROFILE_METHODS


@probe("no-closed-notice")
async def _closed_notice() -> bool:
    ch = _channel()
    ch._ws = _FakeWS()
    await ch._read()
    bodies = []
    while not ch._events.empty():
        bodies.append(ch._events.get_nowait())
    return not any(isinstance(b, dict) and b.get("closed") for b in bodies)


@probe("disconnect-on-410")
async def _on_410() -> bool:
    fatal: list[bool] = []
    g = _gateways(on_fatal=lambda: fatal.append(True))
    g.close_later("c1")
    await asyncio.gather(*list(g._background))
    return bool(fatal)


@probe("unbounded-close-interrupts")
def _close_bound() -> bool:
    from runner_ref import timings
    return timings.INTERRUPT_WAIT > 10


@probe("running-never-cleared")
def _running_cleared() -> bool:
    from runner_ref import gateway_channel
    return "message.complete" not in gateway_channel.COMPLETION_EVENTS


def _owned_channel(registry: Any) -> Any:
    from runner_ref.gateway_channel import Channel, OwnedSession
    ch = Channel("c1", False, registry)
    ch.sessions["s1"] = OwnedSession("default", None)
    return ch


@probe("running-only-at-submit")
def _running_only_at_submit() -> bool:
    ch = _owned_channel(NS(session_info=lambda *_a: None))
    ch._on_frame({"method": "event", "params": {"type": "message.start", "session_id": "s1"}})
    return not ch.sessions["s1"].running


@probe("resend-after-drop")
async def _resend_after_drop() -> bool:
    connects: list[int] = []

    async def ws_connect() -> Any:
        connects.append(1)
        raise ConnectionError("probe: no second socket")

    class DroppedWs:
        async def send_str(self, _text: str) -> None:
            raise ConnectionError("dropped before the reply")

    ch = _owned_channel(NS(hermes=NS(ws_connect=ws_connect)))
    ch._ws = DroppedWs()  # type: ignore[assignment]
    try:
        await ch.call("prompt.submit", {"session_id": "s1", "text": "x"})
    except Exception:  # noqa: BLE001 - the reference runner refuses; only the resend counts
        pass
    return bool(connects)
