"""Admit validity (§2.6): revoked channel, authorization bump, disable, profiles, stop methods."""

from __future__ import annotations

import asyncio
import base64
import json
from typing import Any

import aiohttp

from fake_server import CommandFailed, ControlPlane, Extras, ManualClock, Registration

from .conftest import FAST
from .fake_server_client import AutoRunner, Client

STATUS = {"path": "/api/status", "method": "GET"}


async def admit(client: Client, cmd_id: str) -> bool:
    status, body = await client.post("admit", {"id": cmd_id})
    assert status == 200
    return bool(body["allowed"])


async def deliver(client: Client) -> list[dict[str, Any]]:
    status, body = await client.poll()
    assert status == 200
    return list(body["commands"])


async def test_account_authorization_bump(cp: ControlPlane, client: Client, reg: Registration) -> None:
    await cp.create_account("alice", ["default"])
    await client.connect()
    h = await cp.submit(reg.runner_id, "http", {**STATUS, "search": "?profile=default"}, account="alice")
    await deliver(client)
    assert await admit(client, h.id)
    await cp.bump_authorization("alice")
    assert not await admit(client, h.id)
    assert h.admits == [True, False]


async def test_inactive_account(cp: ControlPlane, client: Client, reg: Registration) -> None:
    await cp.create_account("alice", ["default"])
    await client.connect()
    h = await cp.submit(reg.runner_id, "http", STATUS, account="alice")
    await cp.set_account_active("alice", False)
    assert not await admit(client, h.id)
    out = await cp.command(reg.runner_id, "http", STATUS, account="alice")
    assert (out.status, out.code) == (403, "runner_authorization_revoked")


async def test_profile_intersection_at_enqueue(cp: ControlPlane, client: Client, reg: Registration) -> None:
    # runner: default, work; alice: work, other; source local: any → effective {work}
    await cp.create_account("alice", ["work", "other"])
    await client.connect()
    for profile in ("default", "other", "nope"):
        out = await cp.command(reg.runner_id, "lease.create", {"profile": profile}, account="alice")
        assert (out.status, out.code) == (403, "runner_profile_forbidden"), profile
    h = await cp.submit(reg.runner_id, "http", {**STATUS, "search": "profile=work"}, account="alice")
    assert not h.done()


async def test_source_profiles_restrict(cp: ControlPlane, client: Client) -> None:
    await cp.add_source("node2", "Node 2", allowed_profiles=["work"])
    r2 = await cp.register_runner(name="r2", source="node2", allowed_profiles=["default", "work"])
    c2 = Client(client.session, cp.url, r2.runner_id, r2.token)
    await c2.connect()
    out = await cp.command(r2.runner_id, "http", {**STATUS, "search": "?profile=default"})
    assert out.code == "runner_profile_forbidden"


async def test_profile_change_after_enqueue_opt_in(
    clock: ManualClock, http: aiohttp.ClientSession
) -> None:
    """Harness extra (off by default): admit re-checks the command's profile."""
    async with ControlPlane(timings=FAST, clock=clock, extras=Extras(admit_checks_profile=True)) as cp:
        reg = await cp.register_runner(name="r1", allowed_profiles=["default", "work"])
        client = Client(http, cp.url, reg.runner_id, reg.token)
        await cp.create_account("alice", ["default", "work"])
        await client.connect()
        h1 = await cp.submit(reg.runner_id, "http", {**STATUS, "search": "?profile=work"}, account="alice")
        h2 = await cp.submit(reg.runner_id, "http", {**STATUS, "search": "?profile=default"}, account="alice")
        await deliver(client)
        await cp.set_account_profiles("alice", ["default"])
        assert not await admit(client, h1.id)
        await cp.set_runner_profiles(reg.runner_id, ["work"])
        assert not await admit(client, h2.id)
        assert h1.admit_reasons == ["profile not effective"] == h2.admit_reasons


async def test_profile_change_after_enqueue_upstream(cp: ControlPlane, client: Client, reg: Registration) -> None:
    """Upstream's admit closures do not re-check the command's profile: a profile removed after
    enqueue still admits (audit §2.6 row 42)."""
    await cp.create_account("alice", ["default", "work"])
    await client.connect()
    h1 = await cp.submit(reg.runner_id, "http", {**STATUS, "search": "?profile=work"}, account="alice")
    await deliver(client)
    await cp.set_account_profiles("alice", ["default"])
    assert await admit(client, h1.id)
    assert cp.lifecycle.kinds(h1.id) == ["queued", "delivered", "admitted"]


async def test_http_result_rechecked_and_profiles_filtered(cp: ControlPlane, client: Client, reg: Registration) -> None:
    await cp.create_account("alice", ["default"])
    await client.connect()
    h = await cp.submit(reg.runner_id, "http", {"path": "/api/profiles", "method": "GET"}, account="alice")
    await deliver(client)
    body = base64.b64encode(json.dumps([{"name": "default"}, {"name": "work"}, {"name": "x"}]).encode()).decode()
    await client.post("result", {"id": h.id, "result": {"status": 200, "headers": {}, "body": body}})
    out = await h
    assert json.loads(base64.b64decode(out.result["body"])) == [{"name": "default"}]
    h2 = await cp.submit(reg.runner_id, "http", STATUS, account="alice")
    await deliver(client)
    await cp.bump_authorization("alice")
    await client.post("result", {"id": h2.id, "result": {"status": 200}})
    assert ((await h2).status, (await h2).code) == (403, "runner_authorization_revoked")


async def test_disabled_runner_cannot_admit(cp: ControlPlane, client: Client, reg: Registration) -> None:
    await client.connect()
    h = await cp.submit(reg.runner_id, "http", STATUS)
    await deliver(client)
    await cp.disable_runner(reg.runner_id)
    status, body = await client.post("admit", {"id": h.id})
    assert (status, body["code"]) == (403, "runner_unauthorized")


async def open_channel(cp: ControlPlane, client: Client, reg: Registration, **kw: Any) -> Any:
    """Open a channel by hand: submit gateway.open, deliver, admit, answer ok."""
    ch, h = await cp.submit_open_channel(reg.runner_id, **kw)
    cmds = await deliver(client)
    assert cmds[0]["kind"] == "gateway.open" and cmds[0]["payload"]["connectionId"] == ch.connection_id
    assert await admit(client, h.id)
    await client.post("result", {"id": h.id, "result": {"ok": True}})
    assert (await h).ok
    return ch


async def test_revoked_channel_and_stop_methods(cp: ControlPlane, client: Client, reg: Registration) -> None:
    await cp.create_account("alice", ["default"])
    await client.connect()
    ch = await open_channel(cp, client, reg, account="alice", profile="default")
    prompt = await cp.submit_rpc(ch, "prompt.submit", {"session_id": "s1", "text": "hi"})
    interrupt = await cp.submit_rpc(ch, "session.interrupt", {"session_id": "s1"})
    await deliver(client)
    cp.revoke_channel(ch)
    assert not await admit(client, prompt.id)
    assert await admit(client, interrupt.id)  # stop methods are exempt
    later = await cp.rpc(ch, "prompt.submit", {"session_id": "s1"})
    assert (later.status, later.code) == (403, "runner_command_not_admitted")
    stop = await cp.submit_rpc(ch, "session.active_list", {"profile": "default", "current_session_id": "s1"})
    assert not stop.done()


async def test_authorization_bump_keeps_only_stop_methods(cp: ControlPlane, client: Client, reg: Registration) -> None:
    await cp.create_account("alice", ["default"])
    await client.connect()
    ch = await open_channel(cp, client, reg, account="alice", profile="default")
    await cp.bump_authorization("alice")
    assert (await cp.rpc(ch, "prompt.submit", {})).code == "runner_command_not_admitted"
    close = await cp.submit_rpc(ch, "session.close", {"session_id": "s"})
    await deliver(client)
    assert await admit(client, close.id)


async def test_gateway_open_admit_needs_valid_channel(cp: ControlPlane, client: Client, reg: Registration) -> None:
    await cp.create_account("alice", ["default"])
    await client.connect()
    ch, h = await cp.submit_open_channel(reg.runner_id, account="alice", profile="default")
    await deliver(client)
    await cp.bump_authorization("alice")
    assert not await admit(client, h.id)
    assert not ch.closed.is_set()


async def test_lease_admit_needs_active_lease(cp: ControlPlane, client: Client, reg: Registration) -> None:
    async with AutoRunner(client):
        ch = await cp.open_channel(reg.runner_id)
        lease = await cp.create_lease(ch, profile="default", session={"runtimeId": "s", "storedId": "t"})
        assert (await cp.bind_lease(lease)).ok
        cp.revoke_lease(lease)
        out = await cp.bind_lease(lease)
    assert (out.status, out.code) == (502, "runner_command_not_admitted")  # the runner's refusal


async def test_closing_channel_fails_its_queue(cp: ControlPlane, client: Client, reg: Registration) -> None:
    await client.connect()
    ch = await open_channel(cp, client, reg)
    h = await cp.submit_rpc(ch, "prompt.submit", {"session_id": "s"})
    close = asyncio.create_task(cp.close_channel(ch))
    out = await h
    assert (out.status, out.code) == (409, "runner_command_not_admitted")
    cmds = await deliver(client)
    assert [c["kind"] for c in cmds] == ["gateway.close"]
    await client.post("result", {"id": cmds[0]["id"], "result": {"ok": True}})
    assert (await close).ok and ch.closed.is_set()


async def test_open_channel_failure_raises(cp: ControlPlane, client: Client, reg: Registration) -> None:
    runner = AutoRunner(client, lambda cmd: {"error": {"message": "dup", "code": "runner_error"}})
    async with runner:
        try:
            await cp.open_channel(reg.runner_id)
        except CommandFailed as e:
            assert e.outcome.status == 502
        else:
            raise AssertionError("expected CommandFailed")
        ch = await cp.open_channel(reg.runner_id, check=False)
        assert ch.closed.is_set() and ch.open_outcome is not None and not ch.open_outcome.ok
