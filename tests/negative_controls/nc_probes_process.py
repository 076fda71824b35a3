"""Probes of the config-process and limits controls: ``negative_controls/controls_process.py`` (see
``nc_probes.py``)."""
from __future__ import annotations

import asyncio
import os
import tempfile
from types import SimpleNamespace as NS
from typing import Any

from tests.negative_controls.nc_probes import (
    _accepts,
    _config,
    _gateways,
    _noop,
    _raises,
    _yield,
    probe,
)


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


def _loop_for_shutdown(polls: list[bool]) -> Any:
    async def poll(reset: bool) -> dict[str, Any]:
        polls.append(reset)
        return {"epoch": "e", "commands": []}
    me = NS(machine=NS(poll=poll, close=_noop), hermes=NS(close=_noop), _tasks=set(),
            _connected=True)

    async def disconnect() -> None:
        me._connected = False
    me._disconnect_local = disconnect
    return me


@probe("polls-after-stop")
async def _polls_after_stop() -> bool:
    from runner_ref.poll_loop import PollLoop
    polls: list[bool] = []
    await PollLoop._shutdown(_loop_for_shutdown(polls))  # type: ignore[arg-type]
    return bool(polls)


@probe("runs-commands-admitted-at-stop")
async def _runs_at_stop() -> bool:
    from runner_ref.poll_loop import PollLoop
    me = _loop_for_shutdown([])
    seen: list[bool] = []

    async def pending_command() -> None:   # its admit answer comes in a few loop turns later
        await _yield(3)
        seen.append(me._connected)
    me._tasks.add(asyncio.ensure_future(pending_command()))
    await PollLoop._shutdown(me)  # type: ignore[arg-type]
    return seen == [True]   # executed while the runner still counted itself connected
