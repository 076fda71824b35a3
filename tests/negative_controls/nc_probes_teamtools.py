"""Probes of the team-tool controls: ``negative_controls/controls_teamtools.py`` (see
``nc_probes.py``)."""
from __future__ import annotations

import asyncio
from types import SimpleNamespace as NS
from typing import Any

from tests.negative_controls.nc_probes import _leases, probe


@probe("short-lease-token")
def _short_token() -> bool:
    from runner_ref.teamtools.listener import LoopbackListener
    listener = LoopbackListener(tools=[], relay=None, is_active=lambda: True)  # type: ignore[arg-type]
    return len(listener.token) < 43


@probe("bind-ignores-native-tools")
async def _native_tools() -> bool:
    from runner_ref.hermes import HermesClient

    async def request(method: str, path: str, **_: Any) -> Any:
        return 200, {}, b'{"ok":true,"native_tools":false}'
    _, reply = await HermesClient.post_json(NS(request=request),  # type: ignore[arg-type]
                                            "/api/plugins/yaoyao-bot-bridge/bind", {})
    return reply.get("native_tools") is True


async def _renew_probe(*, owned: bool = True, bind_fails: bool = False) -> Any:
    """Run LeaseManager._renew on a bound lease due for its re-check at t = 300 (expiry 1800)."""
    from runner_ref.teamtools.leases import LeaseManager
    seen = NS(binds=0, disposed=False)
    lease = NS(next_renew=300.0, expires_at=1800.0, bound=True)

    async def _bind(_lease: Any) -> None:
        seen.binds += 1
        if bind_fails:
            raise RuntimeError("bind refused")

    async def _dispose(_lease: Any) -> None:
        seen.disposed = True

    me = NS(renew_every=300.0, ttl=1800.0, _owned=lambda _l: owned, _bind=_bind,
            _dispose=_dispose)
    await LeaseManager._renew(me, lease, 300.0)  # type: ignore[arg-type]
    seen.expires_at = lease.expires_at
    return seen


@probe("no-lease-recheck")
async def _no_recheck() -> bool:
    return (await _renew_probe()).binds == 0


@probe("recheck-keeps-expiry")
async def _keeps_expiry() -> bool:
    return bool((await _renew_probe()).expires_at < 2100.0)


@probe("failed-rebind-kept")
async def _rebind_kept() -> bool:
    return not (await _renew_probe(bind_fails=True)).disposed


@probe("lease-stored-id-stale")
def _stored_id_stale() -> bool:
    from runner_ref.teamtools.leases import LeaseManager, State
    lease = NS(runtime_id="r1", state=State.ACTIVE, stored_id="old")
    LeaseManager.on_session_info(NS(_leases={"l1": lease}), "r1", "new")  # type: ignore[arg-type]
    return lease.stored_id == "old"


@probe("bind-once-in-flight")
async def _bind_once_in_flight() -> bool:

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


def _head(**kw: Any) -> bool:
    from runner_ref.teamtools import gates
    req = gates.GateInput(**{"peer_ip": "127.0.0.1", "host": "127.0.0.1:5", "origin": None,
                             "authorization": "Bearer tok", "lease_active": True,
                             "method": "POST", "content_type": "application/json",
                             "content_length": 2, **kw})
    return gates.check_head(req, gates.Context(port=5, token="tok")) is None


probe("listener-no-token-check")(lambda: _head(authorization="Bearer wrong"))


probe("listener-allows-origin")(lambda: _head(origin="http://evil.example"))


probe("listener-no-size-limit")(lambda: _head(content_length=10**6))


def _listener(token: str = "tok", relay: Any = None) -> Any:
    from runner_ref.teamtools.listener import LoopbackListener, ToolSpec

    async def default_relay(*args: Any) -> Any:
        return None
    return LoopbackListener(tools=[ToolSpec("real.tool", "n", "", {})],
                            relay=relay or default_relay, is_active=lambda: True, token=token)


@probe("listener-on-all-interfaces")
async def _bind_all() -> bool:
    lst = _listener()
    await lst.start()
    try:
        return lst.host != "127.0.0.1"
    finally:
        await lst.close()


@probe("real-tool-ids")
def _real_ids() -> bool:
    return _listener().listing()["tools"][0]["id"] == "real.tool"


@probe("unsalted-tool-ids")
def _unsalted() -> bool:
    return _listener("a").listing() == _listener("b").listing()


def _decide(seen_fp: str | None, n: int = 0) -> str:
    from runner_ref.teamtools import call_book
    from runner_ref.teamtools.call_rules import Call
    call = Call("t", "c", {})
    seen = {str(i): "x" for i in range(n)}
    if seen_fp is not None:
        seen["c"] = call.fingerprint if seen_fp == "same" else seen_fp
    return str(call_book.decide(seen, call, 128).value)


probe("no-callid-dedupe")(lambda: _decide("same") == "new")


probe("callid-ignores-arguments")(lambda: _decide("other") == "repeat")


probe("no-call-limit")(lambda: _decide(None, 128) == "new")


@probe("relays-opaque-id")
async def _relay_id() -> bool:
    from runner_ref.teamtools.call_rules import Call
    sent: list[str] = []

    async def relay(tool_id: str, arguments: Any, call_id: str) -> Any:
        sent.append(tool_id)
    await _listener(relay=relay)._relay_call("real.tool", Call("team_opaque", "c", {}))
    return sent == ["team_opaque"]


@probe("no-unbind-on-close")
async def _unbind() -> bool:
    posted: list[str] = []

    async def post_json(path: str, body: Any) -> Any:
        posted.append(path)
        return 200, {"ok": True}
    lm = _leases(NS(post_json=post_json))
    await lm._unbind(NS(runtime_id="s1", generation="g"))
    return not posted
