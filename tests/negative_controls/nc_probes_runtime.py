"""Probes of the gateway, lease, process, limit and team-tool controls (see ``nc_probes.py``)."""
from __future__ import annotations

import asyncio
import os
import tempfile
import uuid
from types import SimpleNamespace as NS
from typing import Any

from tests.negative_controls.nc_probes import _accepts, _config, _raises, _yield, probe


def _gateways(**kw: Any) -> Any:
    from runner_ref.gateway import Gateways

    async def post_event(body: Any) -> None:
        return None
    return Gateways(kw.get("hermes", NS()), ("default",), post_event,
                    kw.get("on_fatal", lambda: None))


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


def _leases(plugin: Any = None) -> Any:
    from runner_ref.teamtools.leases import LeaseManager

    async def relay(*args: Any) -> Any:
        return None
    sessions = NS(owner_of=lambda rid: ("c1", "default"), stored_id=lambda rid: None)
    return LeaseManager(relay=relay, plugin=plugin or NS(), sessions=sessions,  # type: ignore[arg-type]
                        auto_renew=False)


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


# -- config and process ----------------------------------------------------------------------
@probe("accepts-world-readable-config")
def _mode() -> bool:
    import json

    import runner_ref.__main__ as m
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "runner.json")
        with open(path, "w") as f:
            json.dump(_config(), f)
        os.chmod(path, 0o644)
        return not _raises(lambda: m.load_config(path))


@probe("no-instance-lock")
def _lock() -> bool:
    from runner_ref.statedir import LockedError, StateDir
    with tempfile.TemporaryDirectory() as tmp:
        one, two = StateDir(tmp, "i1"), StateDir(tmp, "i2")
        one.acquire()
        try:
            return not _raises(two.acquire, LockedError)
        finally:
            two.release()
            one.release()


@probe("shared-state-dir")
def _state_dir() -> bool:
    import runner_ref.__main__ as m
    return not m.state_dir_for("/srv/r/runner.json", "rid").endswith("rid")


probe("localhost-hermes-allowed")(lambda: _accepts(hermesURL="http://localhost:9119"))
probe("accepts-satellite")(lambda: _accepts(satellite=True))
probe("insecure-lan-without-optin")(lambda: _accepts(serverURL="http://10.1.2.3:8080"))
probe("accepts-unknown-keys")(lambda: _accepts(debugMode=True))
probe("relative-computers-path")(lambda: _accepts(computers={
    "runtime": "docker", "imageId": "sha256:" + "0" * 64, "python": "venv/bin/python"}))


@probe("sigterm-exits-nonzero")
async def _signals() -> bool:
    import signal

    import runner_ref.__main__ as m
    m._install_signals(asyncio.Event())
    loop = asyncio.get_running_loop()
    had = loop.remove_signal_handler(signal.SIGTERM)
    loop.remove_signal_handler(signal.SIGINT)
    return not had


@probe("no-shutdown-drain")
def _drain() -> bool:
    from runner_ref import poll_loop
    return poll_loop.timings.SHUTDOWN_DRAIN == 0


@probe("no-channel-cap")
def _channels_cap() -> bool:
    from runner_ref import gateway
    return gateway.timings.MAX_CHANNELS > 64


@probe("no-lease-cap")
def _leases_cap() -> bool:
    from runner_ref.teamtools import leases
    return leases.MAX_LEASES > 64


@probe("no-hermes-body-cap")
async def _body_cap() -> bool:
    from runner_ref import hermes

    async def read(*_: Any) -> bytes:
        return b"x"
    resp: Any = NS(content_length=9 * 1024 * 1024, content=NS(read=read), read=read)
    return await hermes.read_capped(resp, 8 * 1024 * 1024) is not None


@probe("drops-unknown-kinds")
async def _unknown_kind() -> bool:
    from runner_ref.poll_loop import PollLoop
    me = NS(kinds={}, _connected=True, machine=NS(epoch="e"))
    try:
        await PollLoop.execute(me, "weird.kind", {}, "e")  # type: ignore[arg-type]
    except asyncio.CancelledError:
        return True
    return False


@probe("exits-when-hermes-down")
async def _hermes_down() -> bool:
    from runner_ref.hermes import HermesClient
    hc = HermesClient("http://127.0.0.1:1", None)
    try:
        await hc._raw("GET", "/api/status", auth=False)
    except SystemExit:
        return True
    except Exception:  # noqa: BLE001 - the reference's coded failure
        return False
    finally:
        await hc.close()
    return False


@probe("loose-connection-ids")
async def _ids() -> bool:
    from runner_ref.errors import CommandError
    reached: list[bool] = []

    async def ws_connect() -> Any:
        reached.append(True)   # got past the connectionId check
        raise CommandError("hermes_unavailable", "probe", 502)
    g = _gateways(hermes=NS(ws_connect=ws_connect))
    await asyncio.gather(g.open({"connectionId": 12345}), return_exceptions=True)
    return bool(reached)
