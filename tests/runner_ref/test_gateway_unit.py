"""Gateway registry races in-process (a fake Hermes socket): a close that overtakes the
handshake wins, and tombstones refuse a reopen."""
from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from runner_ref.errors import CommandError, ServerError
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


async def test_tombstones_last_60_seconds() -> None:
    now = [1000.0]
    hermes = SlowHermes()
    hermes.release.set()
    gw = Gateways(hermes, ("default",), _post, lambda: None,  # type: ignore[arg-type]
                  clock=lambda: now[0])
    assert await gw.open({"connectionId": "c"}) == {"ok": True}
    assert await gw.close({"connectionId": "c"}) == {"ok": True}
    now[0] += 59.9
    with pytest.raises(CommandError, match="closed"):
        await gw.open({"connectionId": "c"})
    now[0] += 0.2
    assert await gw.open({"connectionId": "c"}) == {"ok": True}
    await gw.close_all()


class HangingWS(FakeWS):
    """Accepts every request and never answers (a Hermes stuck on the interrupt)."""

    def __init__(self) -> None:
        super().__init__()
        self.sent: list[str] = []
        self.got_request = asyncio.Event()

    async def send_str(self, data: str) -> None:
        self.sent.append(data)
        self.got_request.set()


async def test_gateway_close_waits_for_a_close_already_in_progress(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from runner_ref import timings
    from runner_ref.gateway import OwnedSession
    monkeypatch.setattr(timings, "INTERRUPT_WAIT", 0.3)
    ws = HangingWS()

    class Hermes:
        async def ws_connect(self) -> HangingWS:
            return ws

    gw = Gateways(Hermes(), ("default",), _post, lambda: None)  # type: ignore[arg-type]
    await gw.open({"connectionId": "c"})
    gw.channels["c"].sessions["s1"] = OwnedSession("default", None, running=True)
    first = asyncio.create_task(gw.close_channel("c"))   # e.g. the 410 path
    await ws.got_request.wait()
    assert "session.interrupt" in ws.sent[0] and not ws.closed
    assert await gw.close({"connectionId": "c"}) == {"ok": True}
    # order, not duration: the second close returned only once the first had closed the
    # socket, which it does only after its interrupt budget ran out
    assert ws.closed   # it waited for the first close to end
    await first
    assert len(ws.sent) == 1                          # one interrupt, not two


class Frame:
    """What ``async for msg in ws`` yields (``aiohttp.WSMessage``'s two fields the reader uses)."""

    def __init__(self, body: dict[str, Any]) -> None:
        import aiohttp
        self.type = aiohttp.WSMsgType.TEXT
        self.data = json.dumps(body)


class EagerWS(FakeWS):
    """Answers every request with its reply and, right behind it on the wire, one event of the
    session. Queued frames are handed to the reader without a suspension in between, so the
    reader reads the event before the coroutine awaiting the reply can resume: the ordering a
    real Hermes only makes likely (it sends ``session.info`` at once after create/resume) is
    made certain here."""

    def __init__(self) -> None:
        super().__init__()
        self._frames: list[dict[str, Any]] = []
        self._more = asyncio.Event()

    async def send_str(self, data: str) -> None:
        req = json.loads(data)
        method, params = req["method"], req["params"]
        sid = params.get("session_id") or "rt-1"
        if method in ("session.create", "session.resume"):
            result = {"session_id": sid, "stored_session_id": "st-1"}
            event = {"type": "session.info", "session_id": sid,
                     "payload": {"stored_session_id": "st-1"}}
        else:
            result = {"ok": True}
            event = {"type": "marker", "session_id": sid}
        self._frames += [{"jsonrpc": "2.0", "id": req["id"], "result": result},
                         {"jsonrpc": "2.0", "method": "event", "params": event}]
        self._more.set()

    async def __anext__(self) -> Any:
        while not self._frames:
            if self.closed:
                raise StopAsyncIteration
            self._more.clear()
            await self._more.wait()
        return Frame(self._frames.pop(0))

    async def close(self) -> None:
        self.closed = True
        self._more.set()


@pytest.mark.parametrize("method", ["session.create", "session.resume"])
async def test_event_right_behind_the_open_reply_is_forwarded(method: str) -> None:
    """Ownership is registered by the reader as it reads the reply, so the ``session.info``
    that follows it on the wire is forwarded (it was dropped when the session became the
    channel's only once the awaiting coroutine resumed)."""
    ws = EagerWS()
    posted: list[dict[str, Any]] = []
    marker = asyncio.Event()

    async def post(body: dict[str, Any]) -> None:
        posted.append(body)
        if body.get("frame", {}).get("type") == "marker":
            marker.set()

    class Hermes:
        async def ws_connect(self) -> EagerWS:
            return ws

    gw = Gateways(Hermes(), ("default",), post, lambda: None)  # type: ignore[arg-type]
    await gw.open({"connectionId": "c"})
    params = {"profile": "default"} | ({"session_id": "rt-1"} if method == "session.resume" else {})
    await gw.rpc({"connectionId": "c", "method": method, "params": params})
    # a second call on the session: its event is posted after anything read before it
    await gw.rpc({"connectionId": "c", "method": "session.usage", "params": {"session_id": "rt-1"}})
    await marker.wait()
    assert [b["frame"]["type"] for b in posted] == ["session.info", "marker"]
    assert gw.stored_id("rt-1") == "st-1"
    await gw.close_all()


class InterruptHangingWS(HangingWS):
    """Hands the reader the frames a test pushes; never answers a request."""

    def __init__(self) -> None:
        super().__init__()
        self._frames: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.interrupt_sent = asyncio.Event()

    def push(self, body: dict[str, Any]) -> None:
        self._frames.put_nowait(body)

    async def send_str(self, data: str) -> None:
        await super().send_str(data)
        if json.loads(data)["method"] == "session.interrupt":
            self.interrupt_sent.set()

    async def __anext__(self) -> Any:
        getter = asyncio.ensure_future(self._frames.get())
        gone = asyncio.ensure_future(self._gone.wait())
        done, _ = await asyncio.wait({getter, gone}, return_when=asyncio.FIRST_COMPLETED)
        for t in (getter, gone):
            t.cancel()
        if getter not in done:
            raise StopAsyncIteration
        return Frame(getter.result())


async def test_close_all_awaits_the_close_a_410_started(monkeypatch: pytest.MonkeyPatch) -> None:
    """A 410 on ``event`` closes the channel in a background task that the registry keeps and
    ``close_all`` awaits (it was created and dropped: collectable mid-close, never awaited)."""
    from runner_ref import timings
    from runner_ref.gateway import OwnedSession
    monkeypatch.setattr(timings, "INTERRUPT_WAIT", 0.2)
    ws = InterruptHangingWS()

    async def post(body: dict[str, Any]) -> None:
        raise ServerError(410, "runner_connection_closed", "gone")

    class Hermes:
        async def ws_connect(self) -> InterruptHangingWS:
            return ws

    gw = Gateways(Hermes(), ("default",), post, lambda: None)  # type: ignore[arg-type]
    await gw.open({"connectionId": "c"})
    gw.channels["c"].sessions["s1"] = OwnedSession("default", None, running=True)
    ws.push({"jsonrpc": "2.0", "method": "event",
             "params": {"type": "message.delta", "session_id": "s1"}})
    await ws.interrupt_sent.wait()          # the background close is under way
    assert "c" not in gw.channels and not ws.closed
    await gw.close_all()
    assert ws.closed                        # close_all waited for that close to finish
