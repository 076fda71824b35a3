"""Gateway registry races in-process (a fake Hermes socket): a close that overtakes the
handshake wins, and tombstones refuse a reopen."""
from __future__ import annotations

import asyncio
from typing import Any

import pytest

from runner_ref.errors import CommandError
from runner_ref.gateway import Gateways


class FakeWS:
    def __init__(self) -> None:
        self.closed = False
        self._gone = asyncio.Event()

    async def close(self) -> None:
        self.closed = True
        self._gone.set()

    def __aiter__(self) -> FakeWS:
        return self

    async def __anext__(self) -> Any:
        await self._gone.wait()
        raise StopAsyncIteration

    async def send_str(self, data: str) -> None:
        raise ConnectionError("fake")


class SlowHermes:
    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.entered = asyncio.Event()
        self.sockets: list[FakeWS] = []

    async def ws_connect(self) -> FakeWS:
        self.entered.set()
        await self.release.wait()
        ws = FakeWS()
        self.sockets.append(ws)
        return ws


async def _post(body: dict[str, Any]) -> None:
    return None


async def test_close_overtaking_handshake_never_revives() -> None:
    hermes = SlowHermes()
    gw = Gateways(hermes, ("default",), _post, lambda: None)  # type: ignore[arg-type]
    opening = asyncio.create_task(gw.open({"connectionId": "c1"}))
    await hermes.entered.wait()
    assert await gw.close({"connectionId": "c1"}) == {"ok": True}
    hermes.release.set()
    with pytest.raises(CommandError):
        await opening
    assert "c1" not in gw.channels and all(ws.closed for ws in hermes.sockets)
    with pytest.raises(CommandError, match="closed"):
        await gw.open({"connectionId": "c1"})   # tomb-stoned


async def test_open_refusals() -> None:
    hermes = SlowHermes()
    hermes.release.set()
    gw = Gateways(hermes, ("default",), _post, lambda: None)  # type: ignore[arg-type]
    for bad in ({"connectionId": ""}, {"connectionId": 5}, {"connectionId": "a b"}):
        with pytest.raises(CommandError):
            await gw.open(bad)
    with pytest.raises(CommandError) as info:
        await gw.open({"connectionId": "c", "computer": {"environmentId": "x"}})
    assert info.value.code == "computer_unavailable"
    assert await gw.open({"connectionId": "c"}) == {"ok": True}
    with pytest.raises(CommandError, match="already open"):
        await gw.open({"connectionId": "c"})
    with pytest.raises(CommandError) as info:
        await gw.rpc({"connectionId": "c", "method": "prompt.submit",
                      "params": {"session_id": "foreign"}})
    assert info.value.code == "runner_session_forbidden"
    with pytest.raises(CommandError) as info:
        await gw.rpc({"connectionId": "nope", "method": "session.usage", "params": {}})
    assert info.value.code == "runner_connection_closed"
    await gw.close_all()
    assert not gw.channels
