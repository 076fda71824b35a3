"""Probes of the reconnection and generation controls:
``negative_controls/controls_reconnection.py`` (see ``nc_probes.py``)."""
from __future__ import annotations

import asyncio
from types import SimpleNamespace as NS
from typing import Any

from tests.negative_controls.nc_probes import _client, _Ledger, _noop, _poll_client, probe


@probe("reset-only-first-poll")
async def _reset_first() -> bool:
    mc, seen = _client()
    await mc.poll(True)
    await mc.poll(True)
    return "x-runner-reset" not in seen[1]


@probe("stale-epoch-header")
def _stale_epoch() -> bool:
    mc, _ = _client()
    mc._headers_for_post("e1")
    return mc._headers_for_post("e2")["x-runner-epoch"] == "e1"


async def _poll_error(status: int, code: str) -> str:
    from runner_ref.errors import ServerError
    mc, _ = _client(error=ServerError(status, code, "x"))
    try:
        await mc.poll(True)
    except ServerError as exc:
        return exc.code
    return ""


@probe("exits-on-poll-error")
async def _exits() -> bool:
    return await _poll_error(503, "service_updating") == "runner_unauthorized"


@probe("retry-after-unauthorized")
async def _retries() -> bool:
    return await _poll_error(403, "runner_unauthorized") != "runner_unauthorized"


@probe("crash-on-malformed-poll")
async def _malformed() -> bool:
    mc, _ = _client(answer=["not", "an", "object"])
    try:
        await mc.poll(True)
    except SystemExit:
        return True
    except Exception:  # noqa: BLE001 - the reference's coded error
        return False
    return False


@probe("no-reconnect-delay")
def _delay() -> bool:
    from runner_ref import poll_loop
    return poll_loop.timings.RECONNECT_DELAY == 0


@probe("result-lost-on-5xx")
async def _result_lost() -> bool:
    from runner_ref.errors import ServerError
    from runner_ref.poll_loop import PollLoop
    async with _Ledger() as ledger:
        store = ledger.store
        await store.claim("c", "f", 0)
        await store.complete("c", '{"result":1}')

        async def _handle(cmd: Any, epoch: str) -> Any:
            return {"result": 1}, '{"result":1}'

        async def post_encoded(route: str, data: bytes, epoch: str | None = None) -> Any:
            raise ServerError(503, "runner_request_failed", "HTTP 503")
        me = NS(_handling={"c"}, store=store, _handle=_handle,
                machine=NS(post_encoded=post_encoded))
        await PollLoop._deliver(me, {"id": "c"}, "e")  # type: ignore[arg-type]
        return await store.get("c") is None


async def _disconnect() -> tuple[list[str], list[str]]:
    from runner_ref.poll_loop import PollLoop
    done: list[str] = []

    async def dispose_all() -> None:
        done.append("leases")

    async def close_all() -> None:
        done.append("channels")
    me = NS(_connected=True, _stop=asyncio.Event(), leases=NS(dispose_all=dispose_all),
            gateways=NS(close_all=close_all))
    await PollLoop._disconnect_local(me)  # type: ignore[arg-type]
    return done, []


@probe("keep-channels-on-new-epoch")
async def _keep_channels() -> bool:
    return "channels" not in (await _disconnect())[0]


@probe("keep-leases-on-new-epoch")
async def _keep_leases() -> bool:
    return "leases" not in (await _disconnect())[0]


@probe("idle-poll-backoff")
async def _idle_backoff() -> bool:
    from runner_ref.machine_client import MachineClient
    try:
        await asyncio.wait_for(MachineClient.poll(_poll_client([]), False), 0.5)  # type: ignore[arg-type]
    except TimeoutError:
        return True
    return False


@probe("event-errors-ignored")
async def _event_errors() -> bool:
    from runner_ref import codes
    from runner_ref.errors import ServerError
    from runner_ref.gateway import Channel
    fatal: list[bool] = []

    async def post_event(body: Any) -> None:
        raise ServerError.of(codes.REQUEST_FAILED, status=500)
    me = NS(_events=asyncio.Queue(), id="c", _registry=NS(
        post_event=post_event, close_later=lambda cid: None, on_fatal=lambda: fatal.append(True)))
    me._events.put_nowait({"connectionId": "c", "frame": {"type": "x"}})
    me._events.put_nowait(None)
    await asyncio.wait_for(Channel._post(me), 2)  # type: ignore[arg-type]
    return not fatal


@probe("no-tombstone-on-disconnect")
async def _disconnect_tombstones() -> bool:
    from runner_ref.gateway import Gateways
    stones: list[str] = []
    me = NS(channels={"a": NS(id="a")}, _tombstone=stones.append, _close_tracked=_noop,
            _background=set())
    await Gateways.close_all(me)  # type: ignore[arg-type]
    return not stones


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
