"""Probes of the negative controls in negative_controls/controls_spec3.py (see nc_probes.py)."""
from __future__ import annotations

from types import SimpleNamespace as NS
from typing import Any

from tests.negative_controls.nc_probes import probe


def _channel(registry: Any) -> Any:
    from runner_ref.gateway_channel import Channel, OwnedSession
    ch = Channel("c1", False, registry)
    ch.sessions["s1"] = OwnedSession("default", None)
    return ch


@probe("running-only-at-submit")
def _running_only_at_submit() -> bool:
    ch = _channel(NS(session_info=lambda *_a: None))
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

    ch = _channel(NS(hermes=NS(ws_connect=ws_connect)))
    ch._ws = DroppedWs()  # type: ignore[assignment]
    try:
        await ch.call("prompt.submit", {"session_id": "s1", "text": "x"})
    except Exception:  # noqa: BLE001 - the reference runner refuses; only the resend counts
        pass
    return bool(connects)


@probe("bind-once-in-flight")
async def _bind_once_in_flight() -> bool:
    import asyncio

    from runner_ref.teamtools.leases import LeaseManager, State
    lease = NS(bind_lock=asyncio.Lock(), bound=False, stored_id="old", state=State.ACTIVE,
               expires_at=0.0, next_renew=0.0, bind_sent=False)
    posts: list[str] = []

    async def post_json(_path: str, body: dict[str, Any]) -> Any:
        posts.append(body["stored_session_id"])
        lease.stored_id = "new"   # a session.info read while the bind is in flight
        return 200, {"ok": True, "native_tools": True}

    me = NS(_clock=lambda: 0.0, ttl=1800.0, renew_every=300.0, _plugin_timeout=5.0,
            _plugin=NS(post_json=post_json),
            _bind_body=lambda x: {"stored_session_id": x.stored_id})
    await LeaseManager._bind(me, lease)  # type: ignore[arg-type]
    return posts == ["old"]


@probe("connected-only-after-reset")
async def _connected_only_after_reset() -> bool:
    import asyncio

    from runner_ref.poll_loop import PollLoop
    answers = [{"epoch": "e1", "commands": []}, {"epoch": "e2", "commands": []}]
    me = NS(_stop=asyncio.Event(), _reset_requested=False, _connected=False,
            machine=NS(epoch=None), _status=lambda _text: None, _spawn=lambda *_a: None)

    async def poll(_reset: bool) -> Any:
        body = answers.pop(0)
        if not answers:
            me._stop.set()
        return body

    async def until_stopped(coro: Any) -> Any:
        return await coro

    async def disconnect_local() -> None:
        me._connected = False
    me.machine.poll, me._until_stopped, me._disconnect_local = poll, until_stopped, disconnect_local
    me._take_answer = lambda body, reset: PollLoop._take_answer(me, body, reset)  # type: ignore[arg-type]
    await PollLoop._poll_loop(me)  # type: ignore[arg-type]
    return not me._connected


@probe("keep-alive-websocket")
async def _keep_alive_websocket() -> bool:
    from runner_ref.hermes import HermesClient
    client = HermesClient("http://127.0.0.1:9", None)
    try:
        return not client._http().connector.force_close  # type: ignore[union-attr]
    finally:
        await client.close()
