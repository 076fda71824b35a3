"""Probes of the team-tools and the slow positive controls (registry: :mod:`pc_probes`).

A slow probe never measures time (house rule: speed is never asserted): it swaps
:func:`positive_controls.slow.pause` for a recorder and shows that the patched call site asks
for the delay, in the right order relative to the call it delays.
"""
from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from types import SimpleNamespace as NS
from typing import Any

from .pc_probes import _acode_of, probe


# -- team tools --------------------------------------------------------------------------------
@probe("plugin-wait-short")
def _plugin_wait() -> bool:
    from runner_ref.teamtools.leases import LeaseManager
    manager = LeaseManager(relay=None, plugin=None, sessions=None)  # type: ignore[arg-type]
    return manager._plugin_timeout < 10.0


@probe("hex-lease-token")
def _hex_token() -> bool:
    from runner_ref.teamtools import listener
    token = listener.secrets.token_urlsafe(32)
    return len(token) == 64 and all(c in "0123456789abcdef" for c in token)


@probe("other-405-code")
def _other_405() -> bool:
    from runner_ref.teamtools import gates
    ctx = gates.Context(port=5, token="k" * 43)
    req = gates.GateInput(peer_ip="127.0.0.1", host="127.0.0.1:5", origin=None,
                          authorization="Bearer " + "k" * 43, lease_active=True, method="GET",
                          content_type="application/json", content_length=2)
    refusal = gates.check_head(req, ctx)
    return refusal is not None and refusal.status == 405 and refusal.code != "method_not_allowed"


@probe("invalid-call-other-code")
def _invalid_call() -> bool:
    from runner_ref.teamtools import call_rules
    answer = call_rules.parse_call({"toolId": 1, "callId": "c", "arguments": {}})
    return isinstance(answer, call_rules.ListenerAnswer) and "invalid_tool_call" not in str(
        answer.body)


@probe("relays-transport-failure-again")
async def _transport_again() -> bool:
    from runner_ref.errors import ServerError
    from runner_ref.teamtools.call_book import CallBook
    from runner_ref.teamtools.call_rules import Call
    relays: list[int] = []

    async def execute() -> Any:
        relays.append(1)
        raise ServerError(0, "runner_request_failed", "control plane unreachable")
    book = CallBook()
    call = Call("t1", "c1", {})
    await book.run(call, execute)
    await book.run(call, execute)
    return len(relays) == 2


# -- slow ----------------------------------------------------------------------------------------
@contextmanager
def _recorded() -> Iterator[list[Any]]:
    from positive_controls import slow
    log: list[Any] = []
    original = slow.pause

    async def pause(seconds: float) -> None:
        log.append(("pause", seconds))
    slow.pause = pause  # type: ignore[assignment]
    try:
        yield log
    finally:
        slow.pause = original  # type: ignore[assignment]


def _jittered(log: list[Any]) -> bool:
    from positive_controls.slow import JITTER
    pauses = [s for kind, s in log if kind == "pause"]
    return bool(pauses) and all(JITTER[0] <= s <= JITTER[1] for s in pauses)


@probe("jittered-control-plane")
async def _cp_jitter() -> bool:
    from runner_ref.errors import ServerError
    from runner_ref.machine_client import MachineClient
    mc = MachineClient("http://127.0.0.1:1", "rid", "t" * 40, "i", "f")
    with _recorded() as log:
        try:
            await mc.poll(True)
        except ServerError:
            pass
        finally:
            await mc.close()
    return _jittered(log)


@probe("jittered-hermes-http")
async def _hermes_jitter() -> bool:
    from runner_ref.hermes import HermesClient
    client = HermesClient("http://127.0.0.1:1", None)
    with _recorded() as log:
        try:
            await _acode_of(client._raw("GET", "/api/status", auth=False))
        finally:
            await client.close()
    return _jittered(log)


@probe("jittered-hermes-rpc")
async def _rpc_jitter() -> bool:
    from runner_ref.gateway_channel import Channel
    me = NS(closed=True, _ws=None)
    with _recorded() as log:
        await _acode_of(Channel.call(me, "session.create", {}))  # type: ignore[arg-type]
    return _jittered(log)


def _delay_before(log: list[Any], seconds: float, what: str) -> bool:
    return log[:2] == [("pause", seconds), what]


@probe("slow-start")
async def _slow_start() -> bool:
    from positive_controls.slow import START_DELAY
    from runner_ref.poll_loop import PollLoop
    with _recorded() as log:
        async def nothing(*_a: Any) -> None:
            return None

        async def first_poll() -> int:
            log.append("poll")
            return 0

        async def watch() -> None:
            await asyncio.sleep(3600)
        me = NS(_watch_stop=watch, _retire_now=nothing, _poll_loop=first_poll,
                _shutdown=nothing)
        await PollLoop.run(me)  # type: ignore[arg-type]
    return _delay_before(log, START_DELAY, "poll")


@probe("late-events")
async def _late_events() -> bool:
    from positive_controls.slow import EVENT_DELAY
    from runner_ref.poll_loop import PollLoop
    with _recorded() as log:
        async def post(route: str, body: Any, epoch: Any = None) -> Any:
            log.append(route)
        await PollLoop._post_event(NS(machine=NS(post=post)), {"x": 1})  # type: ignore[arg-type]
    return _delay_before(log, EVENT_DELAY, "event")


def _poll_loop_fake(log: list[Any]) -> Any:
    from runner_ref.poll_loop import PollLoop

    async def post(route: str, body: Any, epoch: Any = None) -> Any:
        log.append(route)
        return {"allowed": True}

    async def nothing() -> None:
        return None
    me = NS(_handling=set(), machine=NS(epoch="e", post=post), _connected=False,
            _disconnect_local=nothing, _status=lambda m: None, _tasks=set())

    def spawn(cmd: Any, epoch: str) -> None:
        async def deliver(cmd: dict[str, Any], epoch: str) -> None:
            await asyncio.sleep(0)   # the ledger claim
            await PollLoop._admit_gate(me, cmd, epoch)  # type: ignore[arg-type]
        me._tasks.add(asyncio.ensure_future(deliver(cmd, epoch)))
    me._spawn = spawn
    return me


@probe("poll-after-admit")
async def _poll_after_admit() -> bool:
    from runner_ref.poll_loop import PollLoop
    log: list[Any] = []
    me = _poll_loop_fake(log)
    await PollLoop._take_answer(me, {"epoch": "e", "commands": [{"id": "c1"}]}, False)  # type: ignore[arg-type]
    log.append("poll")   # the loop polls again as soon as _take_answer returns
    await asyncio.gather(*me._tasks)
    return log == ["admit", "poll"]


@probe("reconnect-pause-short")
def _short() -> bool:
    from runner_ref import timings
    return timings.RECONNECT_DELAY < 1.0


@probe("reconnect-pause-long")
def _long() -> bool:
    from runner_ref import timings
    return timings.RECONNECT_DELAY > 1.0


@probe("poll-gap")
async def _gap() -> bool:
    from positive_controls.slow import POLL_GAP
    from runner_ref.poll_loop import PollLoop
    waits: list[float] = []

    async def reconnect_wait(delay: float) -> None:
        waits.append(delay)
    me = _poll_loop_fake([])
    me.reconnect_wait = reconnect_wait
    await PollLoop._take_answer(me, {"epoch": "e", "commands": []}, False)  # type: ignore[arg-type]
    return waits == [POLL_GAP]


@probe("late-admit")
async def _late_admit() -> bool:
    from positive_controls.slow import ADMIT_DELAY
    from runner_ref.poll_loop import PollLoop
    with _recorded() as log:
        async def post(route: str, body: Any, epoch: Any = None) -> Any:
            log.append(route)
            return {"allowed": True}
        await PollLoop._admit_gate(NS(machine=NS(post=post)), {"id": "a"}, "e")  # type: ignore[arg-type]
    return _delay_before(log, ADMIT_DELAY, "admit")
