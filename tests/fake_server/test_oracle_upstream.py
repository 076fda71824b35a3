"""Oracle points where the default behaviour is now upstream's (audit 2026-12-01).

Each test fails on the behaviour before the fix: the helpers sent nothing after a failed open or
create; ``event {closed:true}`` failed the channel's queued commands at once (and ``closed:1``
was ignored); features were kept on the runner record across online states; a tool call that
finished after its lease went answered ``{result}``; a request during a restart could hit
``assert online is not None`` (500).
"""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp

from fake_server import ControlPlane, Registration

from .fake_server_client import AutoRunner, Client

STATUS = {"path": "/api/status", "method": "GET"}


def tool_body(lease_id: str, call_id: str = "c1") -> dict[str, Any]:
    return {"leaseId": lease_id, "callId": call_id, "toolId": "t", "arguments": {}}


async def test_failed_open_is_followed_by_gateway_close(cp: ControlPlane, client: Client, reg: Registration) -> None:
    runner = AutoRunner(client, lambda cmd: {"error": {"message": "no", "code": "runner_gateway_failed"}}
                        if cmd["kind"] == "gateway.open" else {"result": {}})
    async with runner:
        ch = await cp.open_channel(reg.runner_id, check=False)
        assert ch.open_outcome is not None and not ch.open_outcome.ok
        close = await cp.lifecycle.wait_for(
            lambda f: f.kind == "result" and f.detail.get("status") == 200, timeout=10)
    kinds = [c["kind"] for c in runner.seen]
    assert kinds == ["gateway.open", "gateway.close"]
    assert runner.seen[1]["payload"] == {"connectionId": ch.connection_id}
    assert close.command_id == runner.seen[1]["id"]


async def test_aborted_open_is_followed_by_gateway_close(cp: ControlPlane, client: Client, reg: Registration) -> None:
    await client.connect()
    task = asyncio.create_task(cp.open_channel(reg.runner_id))
    opened = await cp.lifecycle.wait_for(lambda f: f.kind == "queued")
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    close = await cp.lifecycle.wait_for(lambda f: f.kind == "queued" and f.detail.get("kind") == "gateway.close")
    assert close.connection_id is None or close.connection_id == opened.connection_id
    _, body = await client.poll()
    assert [c["kind"] for c in body["commands"]] == ["gateway.close"]
    assert body["commands"][0]["payload"] == {"connectionId": opened.connection_id}


async def test_failed_lease_create_is_followed_by_lease_close(cp: ControlPlane, client: Client, reg: Registration) -> None:
    runner = AutoRunner(client, lambda cmd: {"error": {"message": "no"}}
                        if cmd["kind"] == "lease.create" else {"result": {}})
    async with runner:
        ch = await cp.open_channel(reg.runner_id)
        lease = await cp.create_lease(ch, profile="default", session={}, check=False)
        await cp.lifecycle.wait_for(lambda f: f.kind == "result" and f.lease_id is None
                                    and any(c["kind"] == "lease.close" for c in runner.seen))
    assert [c["kind"] for c in runner.seen] == ["gateway.open", "lease.create", "lease.close"]
    assert runner.seen[2]["payload"] == {"leaseId": lease.lease_id}


async def test_event_closed_truthy_keeps_queued_commands(cp: ControlPlane, client: Client, reg: Registration) -> None:
    async with AutoRunner(client):
        ch = await cp.open_channel(reg.runner_id)
    await client.connect()  # the AutoRunner is gone; a fresh state would close ch: reopen
    ch = await _open_by_hand(cp, client, reg)
    rpc = await cp.submit_rpc(ch, "session.list")
    assert await client.post("event", {"connectionId": ch.connection_id, "closed": 1}) == (200, {"ok": True})
    assert ch.closed.is_set() and ch.closed_by == "runner" and ch.disconnects == 1
    assert not rpc.done()  # still queued: delivered, and its admit is refused
    _, body = await client.poll()
    assert [c["id"] for c in body["commands"]] == [rpc.id]
    assert await client.post("admit", {"id": rpc.id}) == (200, {"allowed": False})
    assert rpc.admit_reasons == ["channel closed"]
    refused = await cp.lifecycle.wait_for(lambda f: f.kind == "admit_refused" and f.command_id == rpc.id)
    assert refused.reason == "channel closed"


async def _open_by_hand(cp: ControlPlane, client: Client, reg: Registration) -> Any:
    ch, handle = await cp.submit_open_channel(reg.runner_id)
    _, body = await client.poll()
    assert [c["id"] for c in body["commands"]] == [handle.id]
    await client.post("admit", {"id": handle.id})
    await client.post("result", {"id": handle.id, "result": {}})
    assert (await handle).ok
    return ch


async def test_features_live_on_the_online_state(cp: ControlPlane, client: Client, reg: Registration) -> None:
    client.features = "local-vm-v1"
    await client.connect()
    assert cp.features(reg.runner_id) == ["local-vm-v1"]
    record = await cp.get_runner(reg.runner_id)
    assert record is not None and record.summary(online=True)["features"] == ["local-vm-v1"]
    client.features = None  # a new state without the header starts with []
    await client.poll(reset=True)
    assert cp.features(reg.runner_id) == []
    client.features = "local-vm-v1"
    await client.post("admit", {"id": "x"})
    await cp.restart()  # a new hub: no online state, so the summary shows []
    assert cp.features(reg.runner_id) == []
    record = await cp.get_runner(reg.runner_id)
    assert record is not None and record.summary(online=False)["features"] == []


async def test_tool_call_finishing_after_its_lease_went_is_expired(
    cp: ControlPlane, client: Client, reg: Registration
) -> None:
    gate = asyncio.Event()

    async def slow(tool_id: str, args: dict[str, Any]) -> Any:
        await gate.wait()
        return "done"

    async with AutoRunner(client):
        ch = await cp.open_channel(reg.runner_id)
        lease = await cp.create_lease(ch, profile="default", session={}, handlers={"*": slow})
        call = asyncio.create_task(client.post("tool", tool_body(lease.lease_id)))
        await cp.history.wait_for(lambda ex: ex.route == "tool" and ex.lease_id == lease.lease_id)
        cp.revoke_channel(ch)  # assertActive fails after the call
        gate.set()
        status, body = await call
        assert (status, body["code"]) == (410, "runner_lease_expired")


async def test_no_500_through_repeated_restarts(cp: ControlPlane, http: aiohttp.ClientSession, reg: Registration) -> None:
    client = Client(http, cp.url, reg.runner_id, reg.token)
    await client.connect()
    stop = asyncio.Event()
    statuses: list[int] = []

    async def hammer() -> None:
        while not stop.is_set():
            try:
                for route, body in (("poll", None), ("admit", {"id": "x"}), ("result", {"id": "x"}),
                                    ("event", {"connectionId": "x"})):
                    if route == "poll":
                        status, _ = await client.poll(reset=True)
                    else:
                        status, _ = await client.post(route, body)
                    statuses.append(status)
                async with http.get(cp.url + "/api/app/session") as resp:
                    statuses.append(resp.status)
            except (TimeoutError, aiohttp.ClientError):
                continue  # the socket went with the restart: try again

    tasks = [asyncio.create_task(hammer()) for _ in range(3)]
    for _ in range(8):
        await cp.history.wait_for(lambda ex: ex.answered, after_seq=cp.history.last_seq)
        await cp.restart()
    stop.set()
    await asyncio.gather(*tasks)
    assert statuses and all(s < 500 or s == 503 for s in statuses), sorted(set(statuses))
    assert not [ex for ex in cp.history if ex.status is not None and ex.status >= 500 and ex.code != "service_stopping"]
