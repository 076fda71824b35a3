"""Channels and events, check, tool relay with dedupe, artifacts (§2.6, §6)."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import uuid
from typing import Any

from fake_server import ControlPlane, Registration, ToolError

from .fake_server_client import AutoRunner, Client


async def test_events_reach_owning_channel(cp: ControlPlane, client: Client, reg: Registration) -> None:
    async with AutoRunner(client):
        ch = await cp.open_channel(reg.runner_id)
        other = await cp.open_channel(reg.runner_id)
        frame = {"type": "message.complete", "session_id": "s1", "payload": {"text": "hi"}}
        assert await client.post("event", {"connectionId": ch.connection_id, "frame": {"type": "x"}}) == (200, {"ok": True})
        assert await client.post("event", {"connectionId": ch.connection_id, "frame": frame}) == (200, {"ok": True})
        assert await client.post("event", {"connectionId": ch.connection_id, "frame": {"no": "type"}}) == (200, {"ok": True})
        assert await ch.next_event("message.complete", timeout=1) == frame
        assert [e["type"] for e in ch.events] == ["x", "message.complete"] and other.events == []
        waiting = asyncio.create_task(ch.next_event("late", timeout=5))
        await client.post("event", {"connectionId": ch.connection_id, "frame": {"type": "late"}})
        assert (await waiting)["type"] == "late"


async def test_event_unknown_or_revoked_channel_410(cp: ControlPlane, client: Client, reg: Registration) -> None:
    async with AutoRunner(client):
        ch = await cp.open_channel(reg.runner_id)
        status, body = await client.post("event", {"connectionId": str(uuid.uuid4()), "frame": {"type": "x"}})
        assert (status, body["code"]) == (410, "runner_connection_closed")
        assert (await client.post("event", {"frame": {"type": "x"}}))[0] == 410
        cp.revoke_channel(ch)
        status, body = await client.post("event", {"connectionId": ch.connection_id, "frame": {"type": "x"}})
        assert (status, body["code"]) == (410, "runner_connection_closed")
        assert ch.closed.is_set() and ch.closed_by == "invalid" and ch.events == []


async def test_event_closed_by_runner(cp: ControlPlane, client: Client, reg: Registration) -> None:
    async with AutoRunner(client):
        ch = await cp.open_channel(reg.runner_id)
        assert await client.post("event", {"connectionId": ch.connection_id, "closed": True}) == (200, {"ok": True})
        assert ch.closed.is_set() and ch.closed_by == "runner"
        assert (await client.post("event", {"connectionId": ch.connection_id, "frame": {"type": "x"}}))[0] == 410


async def test_foreign_runner_channel(cp: ControlPlane, client: Client, reg: Registration) -> None:
    await cp.add_source("n2", "N2")
    r2 = await cp.register_runner(name="r2", source="n2")
    c2 = Client(client.session, cp.url, r2.runner_id, r2.token)
    await c2.connect()
    async with AutoRunner(client):
        ch = await cp.open_channel(reg.runner_id)
        status, body = await c2.post("event", {"connectionId": ch.connection_id, "frame": {"type": "x"}})
        assert (status, body["code"]) == (410, "runner_connection_closed")
        assert (await c2.post("check", {"connectionId": ch.connection_id}))[1]["allowed"] is False


async def test_disconnect_closes_channels_and_leases(cp: ControlPlane, client: Client, reg: Registration) -> None:
    async with AutoRunner(client):
        ch = await cp.open_channel(reg.runner_id)
        lease = await cp.create_lease(ch, profile="default", session={"runtimeId": "a", "storedId": "b"})
    await cp.force_watchdog(reg.runner_id)
    assert ch.closed.is_set() and ch.closed_by == "disconnect" and not lease.active


async def test_check_route(cp: ControlPlane, client: Client, reg: Registration) -> None:
    async with AutoRunner(client):
        ch = await cp.open_channel(reg.runner_id)
        assert await client.post("check", {"connectionId": ch.connection_id}) == (
            200, {"allowed": True, "fileTransferMaxBytes": 25 * 1024 * 1024})
        cp.revoke_channel(ch)
        assert (await client.post("check", {"connectionId": ch.connection_id}))[1]["allowed"] is False
        assert (await client.post("check", {}))[1]["allowed"] is False


def tool_body(lease_id: str, call_id: str = "c1", tool_id: str = "echo", arguments: Any = None) -> dict[str, Any]:
    return {"leaseId": lease_id, "toolId": tool_id, "callId": call_id,
            "arguments": {"x": 1} if arguments is None else arguments}


async def test_tool_relay_dedupe_and_limits(cp: ControlPlane, client: Client, reg: Registration) -> None:
    calls: list[dict[str, Any]] = []

    def echo(tool_id: str, args: dict[str, Any]) -> Any:
        calls.append(args)
        return {"echo": args}

    def fails(tool_id: str, args: dict[str, Any]) -> Any:
        raise ToolError(409, "team_task_conflict", "conflict")

    async with AutoRunner(client):
        ch = await cp.open_channel(reg.runner_id)
        lease = await cp.create_lease(
            ch, profile="default", session={"runtimeId": "a", "storedId": "b"},
            tools=[{"id": "echo", "name": "echo", "description": "", "inputSchema": {}}],
            handlers={"echo": echo, "fails": fails},
        )
        body = tool_body(lease.lease_id)
        assert await client.post("tool", body) == (200, {"result": {"echo": {"x": 1}}})
        assert await client.post("tool", body) == (200, {"result": {"echo": {"x": 1}}})
        assert len(calls) == 1 and lease.executions == 1
        status, err = await client.post("tool", tool_body(lease.lease_id, arguments={"x": 2}))
        assert (status, err["code"]) == (409, "idempotency_conflict")
        assert (await client.post("tool", tool_body(lease.lease_id, "f", "fails")))[1]["code"] == "team_task_conflict"
        assert (await client.post("tool", tool_body(lease.lease_id, "n", "nope")))[1]["code"] == "team_tool_not_found"
        for i in range(125):
            assert (await client.post("tool", tool_body(lease.lease_id, f"k{i}")))[0] == 200
        status, err = await client.post("tool", tool_body(lease.lease_id, "one-too-many"))
        assert (status, err["code"]) == (429, "runner_call_limit")
        assert (await client.post("tool", tool_body(lease.lease_id, "c1")))[0] == 200  # known id still answers
        for bad in [{**body, "extra": 1}, {**body, "leaseId": "x"}, {**body, "arguments": []},
                    {**body, "callId": ""}, {**body, "toolId": "t" * 101}]:
            status, err = await client.post("tool", bad)
            assert (status, err["code"]) == (400, "invalid_workspace_request"), bad
        cp.revoke_lease(lease)
        status, err = await client.post("tool", tool_body(lease.lease_id, "after"))
        assert (status, err["code"]) == (410, "runner_lease_expired")
        status, err = await client.post("tool", tool_body(str(uuid.uuid4())))
        assert (status, err["code"]) == (410, "runner_lease_expired")


async def test_concurrent_same_call_runs_once(cp: ControlPlane, client: Client, reg: Registration) -> None:
    gate = asyncio.Event()
    runs = 0

    async def slow(tool_id: str, args: dict[str, Any]) -> Any:
        nonlocal runs
        runs += 1
        await gate.wait()
        return "done"

    async with AutoRunner(client):
        ch = await cp.open_channel(reg.runner_id)
        lease = await cp.create_lease(ch, profile="default", session={}, handlers={"*": slow})
        a = asyncio.create_task(client.post("tool", tool_body(lease.lease_id)))
        b = asyncio.create_task(client.post("tool", tool_body(lease.lease_id)))
        await cp.history.wait_for(lambda ex: ex.route == "tool" and ex.call_id is not None
                                   and len(cp.history.filter(route="tool", where=lambda e: e.call_id is not None)) == 2)
        assert runs == 1
        gate.set()
        assert await a == await b == (200, {"result": "done"})
        assert runs == 1


async def test_tool_after_channel_revoked(cp: ControlPlane, client: Client, reg: Registration) -> None:
    async with AutoRunner(client):
        ch = await cp.open_channel(reg.runner_id)
        lease = await cp.create_lease(ch, profile="default", session={}, handlers={"*": lambda t, a: 1})
        cp.revoke_channel(ch)
        status, err = await client.post("tool", tool_body(lease.lease_id))
        assert (status, err["code"]) == (410, "runner_lease_expired")


async def test_lease_create_payload(cp: ControlPlane, client: Client, reg: Registration) -> None:
    runner = AutoRunner(client)
    async with runner:
        ch = await cp.open_channel(reg.runner_id)
        lease = await cp.create_lease(ch, profile="default", session={"runtimeId": "r", "storedId": "s"},
                                      tools=[{"id": "t"}])
        assert (await cp.close_lease(lease)).ok
    create = next(c for c in runner.seen if c["kind"] == "lease.create")
    assert create["payload"] == {"leaseId": lease.lease_id, "profile": "default", "workId": lease.lease_id,
                                 "session": {"runtimeId": "r", "storedId": "s"}, "catalog": [{"id": "t"}],
                                 "workspaceMemory": False}
    assert [c["kind"] for c in runner.seen] == ["gateway.open", "lease.create", "lease.close"]


async def test_artifact_upload_published_once(cp: ControlPlane, client: Client, reg: Registration) -> None:
    data = b"hello artifact"
    digest = hashlib.sha256(data).hexdigest()
    async with AutoRunner(client):
        ch = await cp.open_channel(reg.runner_id)
        up = str(uuid.uuid4())
        base = {"connectionId": ch.connection_id, "id": up}
        assert (await client.post("artifact", {**base, "phase": "begin", "name": "a.txt", "size": len(data),
                                               "digest": digest}))[0] == 200
        status, body = await client.post("artifact", {**base, "phase": "finish"})
        assert (status, body["code"]) == (409, "artifact_incomplete")
        chunk = base64.b64encode(data).decode()
        assert (await client.post("artifact", {**base, "phase": "append", "index": 0, "data": chunk}))[0] == 200
        first = await client.post("artifact", {**base, "phase": "finish"})
        again = await client.post("artifact", {**base, "phase": "finish"})
        assert first == again and first[0] == 200
        assert [(rid, a.data) for rid, a in cp.artifacts] == [(reg.runner_id, data)]
        cp.revoke_channel(ch)
        status, body = await client.post("artifact", {**base, "phase": "finish"})
        assert (status, body["code"]) == (403, "artifact_forbidden")
