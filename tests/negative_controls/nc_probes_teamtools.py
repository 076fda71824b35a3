"""Probes of the team-tool controls (see ``nc_probes.py``)."""
from __future__ import annotations

from types import SimpleNamespace as NS
from typing import Any

from tests.negative_controls.nc_probes import probe
from tests.negative_controls.nc_probes_runtime import _leases


# -- team tools -------------------------------------------------------------------------------
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
