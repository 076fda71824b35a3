"""Fault controls and the history (issue item 9)."""

from __future__ import annotations

import asyncio
import hashlib
import json

import aiohttp

from fake_server import ControlPlane, ManualClock, Registration

from .fake_server_client import Client

STATUS = {"path": "/api/status", "method": "GET"}


async def test_fail_next(cp: ControlPlane, client: Client, reg: Registration) -> None:
    cp.faults.fail_next("poll", n=2, status=503, code="service_updating")
    for _ in range(2):
        status, body = await client.poll(reset=True)
        assert (status, body["code"]) == (503, "service_updating")
    assert not cp.is_online(reg.runner_id)  # a failed request never reached the gates
    assert (await client.poll(reset=True))[0] == 200
    assert [ex.fault for ex in cp.history.filter(route="poll")] == ["fail", "fail", None]


async def test_drop_next(cp: ControlPlane, client: Client) -> None:
    await client.connect()
    cp.faults.drop_next("admit")
    try:
        await client.post("admit", {"id": "x"})
    except aiohttp.ClientError:
        pass
    else:
        raise AssertionError("the connection should have been dropped")
    assert (await client.post("admit", {"id": "x"})) == (200, {"allowed": False})
    assert [ex.status for ex in cp.history.filter(route="admit")] == [None, 200]


async def test_delay_next_on_the_clock(cp: ControlPlane, clock: ManualClock, client: Client) -> None:
    await client.connect()
    cp.faults.delay_next("admit", n=1, seconds=3)
    call = asyncio.create_task(client.post("admit", {"id": "x"}))
    due = clock.now() + 3
    await clock.wait_pending(due)  # the handler sleeps on the control-plane clock
    assert cp.history.filter(route="admit")[0].status is None  # not answered yet
    clock.advance(2.99)
    assert due in clock.pending()
    clock.advance(0.01)
    assert await asyncio.wait_for(call, 5) == (200, {"allowed": False})


async def test_wildcard_route(cp: ControlPlane, client: Client) -> None:
    cp.faults.fail_next("*", n=1, status=502, code="bad_gateway")
    assert (await client.poll(reset=True))[1]["code"] == "bad_gateway"


async def test_duplicate_deliveries(cp: ControlPlane, client: Client, reg: Registration) -> None:
    await client.connect()
    cp.faults.duplicate_deliveries(1)
    a = await cp.submit(reg.runner_id, "http", STATUS)
    b = await cp.submit(reg.runner_id, "http", STATUS)
    _, body = await client.poll()
    assert [c["id"] for c in body["commands"]] == [a.id, a.id, b.id]
    cp.faults.duplicate_deliveries(1, mode="next_poll")
    c = await cp.submit(reg.runner_id, "http", STATUS)
    assert [x["id"] for x in (await client.poll())[1]["commands"]] == [c.id]
    assert [x["id"] for x in (await client.poll())[1]["commands"]] == [c.id]


async def test_expire_now(cp: ControlPlane, client: Client, reg: Registration) -> None:
    await client.connect()
    h = await cp.submit(reg.runner_id, "http", STATUS)
    cp.faults.expire_now(h)
    assert (await h).code == "runner_command_uncertain"


async def test_history_records_everything(cp: ControlPlane, clock: ManualClock, client: Client, reg: Registration) -> None:
    await client.connect()
    h = await cp.submit(reg.runner_id, "http", STATUS)
    await client.poll()
    clock.advance(1)
    await client.post("admit", {"id": h.id})
    await client.post("result", {"id": h.id, "result": {"status": 200}})
    await client.post("admit", {"id": h.id}, headers={"x-runner-epoch": "bad"})
    entries = cp.history.filter(runner_id=reg.runner_id)
    assert [e.route for e in entries] == ["poll", "poll", "admit", "result", "admit"]
    assert [e.seq for e in entries] == sorted(e.seq for e in entries)
    assert [e.status for e in entries] == [200, 200, 200, 200, 409]
    assert entries[-1].code == "runner_epoch_changed" and entries[-1].request_epoch == "bad"
    assert entries[1].commands[0]["id"] == h.id
    assert all(e.instance == client.instance and e.epoch == client.epoch for e in entries)
    assert entries[0].reset and not entries[1].reset
    assert entries[2].time == entries[1].time + 1
    raw = json.dumps({"id": h.id, "result": {"status": 200}}).encode()
    assert entries[3].request_digest == hashlib.sha256(raw).hexdigest()
    assert entries[3].request_body == {"id": h.id, "result": {"status": 200}}
    assert entries[3].response_body == {"ok": True} and entries[3].response_digest
    assert cp.history.codes("admit") == [None, "runner_epoch_changed"]
    assert len(cp.history.deliveries(h.id)) == 1
    # no secret in the history
    assert client.token not in repr(list(cp.history))
