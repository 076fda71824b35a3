"""LeaseManager: ``lease.create`` (payload checks, the 64-lease limit, session ownership) and
``lease.bind`` (the plugin bind body, refusals, the first reply, retries and updates)."""
from __future__ import annotations

import re
import uuid
from typing import Any

import aiohttp
import pytest

from runner_ref.teamtools import ids
from runner_ref.teamtools.leases import MAX_LEASES, State

from .lease_world import CATALOG, World, call_listener, expect

pytestmark = pytest.mark.timeout(60)


# -- lease.create ------------------------------------------------------------------------------
async def test_create_opens_a_listener_and_answers_ok(world: World) -> None:
    lease_id = await world.create()
    lease = world.manager.lease(lease_id)
    assert lease is not None and lease.state is State.ACTIVE and lease.connection_id == "conn-1"
    status, body = await call_listener(lease.listener.url, lease.listener.token, "/tools/list", {})
    assert status == 200
    assert [t["id"] for t in body["tools"]] == [
        ids.opaque_id(lease.listener.token, c["id"]) for c in CATALOG]
    assert world.plugin.posts == []  # creation never binds


@pytest.mark.parametrize("lease_id", ["", "x", "not-a-uuid", "00000000-0000-0000-0000-0000000000010",
                                      "00000000-0000-0000-0000-00000000000g", None, 7])
async def test_malformed_lease_ids_are_plain_errors(world: World, lease_id: Any) -> None:
    await expect("runner_error", world.manager.create({**world.payload(), "leaseId": lease_id}))


@pytest.mark.parametrize("change", [
    {"profile": ""}, {"profile": None}, {"workId": 3}, {"session": None},
    {"session": {"runtimeId": ""}}, {"session": {"runtimeId": "rt-1", "storedId": 5}},
    {"catalog": None}, {"catalog": [{"name": "x"}]}, {"catalog": [CATALOG[0], CATALOG[0]]},
])
async def test_malformed_payloads_are_plain_errors(world: World, change: dict[str, Any]) -> None:
    await expect("runner_error", world.manager.create({**world.payload(), **change}))
    assert world.manager.active() == []


async def test_duplicate_and_tombstoned_ids_are_plain_errors(world: World) -> None:
    lease_id = await world.create()
    await expect("runner_error", world.manager.create(world.payload(lease_id)))
    await world.manager.close({"leaseId": lease_id})
    await expect("runner_error", world.manager.create(world.payload(lease_id)))
    world.clock.advance(60)  # tombstones last 60 s
    assert not world.manager.is_tombstoned(lease_id)
    assert await world.manager.create(world.payload(lease_id)) == {"ok": True}


async def test_64_leases_at_most(world: World) -> None:
    for _ in range(MAX_LEASES):
        await world.create()
    await expect("runner_error", world.manager.create(world.payload()))
    assert len(world.manager.active()) == MAX_LEASES == 64


@pytest.mark.parametrize("runtime,profile", [("rt-unknown", "default"), ("rt-w", "default"),
                                             ("rt-1", "writer")])
async def test_session_must_be_owned_under_the_same_profile(
        world: World, runtime: str, profile: str) -> None:
    await expect("runner_session_forbidden",
                 world.manager.create(world.payload(runtime=runtime, profile=profile)), 403)
    assert world.manager.active() == [] and world.manager.tombstones() == []


# -- lease.bind --------------------------------------------------------------------------------
async def test_bind_posts_the_plugin_bind_body(world: World) -> None:
    lease_id = await world.create()
    assert await world.bind(lease_id, stored="stored-1b") == {"ok": True}
    lease = world.manager.lease(lease_id)
    assert lease is not None
    [body] = world.plugin.binds()
    assert body == {
        "native_tools": True, "session_id": "rt-1", "stored_session_id": "stored-1b",
        "profile": "default", "generation": lease.generation, "bridge_url": lease.listener.url,
        "token": lease.listener.token, "expires_at": 1_700_000_000_000 + 1_800_000,
        "workspace_memory": True,
    }
    assert re.fullmatch(r"work-7:[0-9a-f-]{36}", body["generation"])
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+", body["bridge_url"])
    # The plugin can call the listener with what it was given.
    status, listing = await call_listener(body["bridge_url"], body["token"], "/tools/list", {})
    assert status == 200 and len(listing["tools"]) == 2


async def test_bind_refusals(world: World) -> None:
    await expect("runner_lease_expired", world.bind(str(uuid.uuid4())), 410)
    lease_id = await world.create()
    await expect("runner_session_forbidden", world.bind(lease_id, runtime="rt-2"), 403)
    del world.sessions.owners["rt-1"]
    await expect("runner_session_forbidden", world.bind(lease_id), 403)
    world.sessions.owners["rt-1"] = ("conn-9", "writer")
    await expect("runner_session_forbidden", world.bind(lease_id), 403)
    assert world.plugin.posts == []
    await world.manager.close({"leaseId": lease_id})
    await expect("runner_lease_expired", world.bind(lease_id), 410)


@pytest.mark.parametrize("reply,code", [
    ((500, {"ok": True}), "team_tools_bind_failed"),
    ((200, {"ok": False}), "team_tools_bind_failed"),
    ((200, None), "team_tools_bind_failed"),
    ((400, {"ok": False, "error": "invalid_bind"}), "team_tools_bind_failed"),
    ((200, {"ok": True}), "team_tools_unavailable"),
    ((200, {"ok": True, "native_tools": False}), "team_tools_unavailable"),
])
async def test_first_bind_reply_must_be_ok_with_native_tools(
        world: World, reply: tuple[int, Any], code: str) -> None:
    lease_id = await world.create()
    world.plugin.replies.append(reply)
    await expect(code, world.bind(lease_id), 409)


async def test_a_plugin_that_raises_is_a_bind_failure(world: World) -> None:
    lease_id = await world.create()

    async def broken(path: str, body: dict[str, Any]) -> tuple[int, Any]:
        raise aiohttp.ClientConnectionError("refused")
    world.plugin.post_json = broken  # type: ignore[method-assign]
    await expect("team_tools_bind_failed", world.bind(lease_id), 409)


async def test_later_binds_need_not_report_native_tools(world: World) -> None:
    lease_id = await world.create()
    await world.bind(lease_id)
    world.plugin.replies.append((200, {"ok": True}))
    assert await world.bind(lease_id) == {"ok": True}


async def test_stored_id_changing_during_bind_retries_once(world: World) -> None:
    lease_id = await world.create()
    changes = iter(["stored-new", "stored-newer", "stored-newest"])
    world.plugin.on_bind = lambda: world.manager.on_session_info("rt-1", next(changes))
    await world.bind(lease_id)
    assert [b["stored_session_id"] for b in world.plugin.binds()] == ["stored-1", "stored-new"]
    lease = world.manager.lease(lease_id)
    assert lease is not None and lease.stored_id == "stored-newer"


async def test_session_info_updates_the_next_bind(world: World) -> None:
    lease_id = await world.create()
    world.manager.on_session_info("rt-1", "stored-x")
    world.manager.on_session_info("rt-other", "stored-y")
    await world.bind(lease_id)
    assert world.plugin.binds()[0]["stored_session_id"] == "stored-x"


async def test_workspace_memory_false_when_absent(world: World) -> None:
    lease_id = await world.create(workspaceMemory=None)
    await world.bind(lease_id)
    assert world.plugin.binds()[0]["workspace_memory"] is False
