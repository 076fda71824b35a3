"""LeaseManager with in-memory Relay / PluginClient / SessionDirectory and a fake clock."""
from __future__ import annotations

import asyncio
import json
import re
import uuid
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from runner_ref.errors import CommandError, ServerError
from runner_ref.teamtools import ids
from runner_ref.teamtools.leases import (
    BIND_PATH,
    MAX_LEASES,
    UNBIND_PATH,
    LeaseManager,
    State,
)
from runner_ref.teamtools.listener import LoopbackListener

pytestmark = pytest.mark.timeout(60)

CATALOG: list[dict[str, Any]] = [{"id": "yaoyao_workspace_create_member", "name": "create_member",
            "description": "Create a member", "inputSchema": {"type": "object"}},
           {"id": "yaoyao_workspace_form_team", "name": "form_team", "description": "Form",
            "inputSchema": {"type": "object"}}]


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class Sessions:
    def __init__(self) -> None:
        self.owners: dict[str, tuple[str, str]] = {"rt-1": ("conn-1", "default"),
                                                   "rt-2": ("conn-2", "default"),
                                                   "rt-w": ("conn-3", "writer")}
        self.stored: dict[str, str] = {"rt-1": "stored-1", "rt-2": "stored-2"}

    def owner_of(self, runtime_id: str) -> tuple[str, str] | None:
        return self.owners.get(runtime_id)

    def stored_id(self, runtime_id: str) -> str | None:
        return self.stored.get(runtime_id)


class Plugin:
    def __init__(self) -> None:
        self.posts: list[tuple[str, dict[str, Any]]] = []
        self.replies: list[tuple[int, Any]] = []  # consumed first; then the default
        self.default: tuple[int, Any] = (200, {"ok": True, "native_tools": True})
        self.gate: asyncio.Event | None = None
        self.entered = asyncio.Event()
        self.bind_seen = asyncio.Event()   # set at every bind
        self.on_bind: Any = None

    async def post_json(self, path: str, body: dict[str, Any]) -> tuple[int, Any]:
        self.posts.append((path, json.loads(json.dumps(body))))
        if path == BIND_PATH:
            self.entered.set()
            self.bind_seen.set()
            if self.on_bind is not None:
                self.on_bind()
            if self.gate is not None:
                await self.gate.wait()
            return self.replies.pop(0) if self.replies else self.default
        return 200, {"ok": True}

    async def wait_binds(self, n: int) -> None:
        while len(self.binds()) < n:
            self.bind_seen.clear()
            await self.bind_seen.wait()

    def binds(self) -> list[dict[str, Any]]:
        return [b for p, b in self.posts if p == BIND_PATH]

    def unbinds(self) -> list[dict[str, Any]]:
        return [b for p, b in self.posts if p == UNBIND_PATH]


class Relay:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str, dict[str, Any], str]] = []
        self.error: Exception | None = None

    async def __call__(self, lease_id: str, tool_id: str, arguments: dict[str, Any],
                       call_id: str) -> Any:
        self.calls.append((lease_id, tool_id, arguments, call_id))
        if self.error is not None:
            raise self.error
        return {"done": tool_id}


class World:
    def __init__(self) -> None:
        self.clock, self.sessions, self.plugin, self.relay = Clock(), Sessions(), Plugin(), Relay()
        self.manager = LeaseManager(relay=self.relay, plugin=self.plugin, sessions=self.sessions,
                                    clock=self.clock,
                                    wall_clock=lambda: 1_699_999_000.0 + self.clock.now,
                                    auto_renew=False)

    @staticmethod
    def payload(lease_id: str | None = None, runtime: str = "rt-1", profile: str = "default",
                **extra: Any) -> dict[str, Any]:
        return {"leaseId": lease_id or str(uuid.uuid4()), "profile": profile, "workId": "work-7",
                "session": {"runtimeId": runtime, "storedId": f"stored-{runtime[3:]}"},
                "catalog": CATALOG, "workspaceMemory": True, "computerPolicy": None, **extra}

    async def create(self, **kw: Any) -> str:
        p = self.payload(**kw)
        assert await self.manager.create(p) == {"ok": True}
        return p["leaseId"]

    async def bind(self, lease_id: str, runtime: str = "rt-1",
                   stored: str | None = None) -> dict[str, Any]:
        return await self.manager.bind({"leaseId": lease_id,
                                        "session": {"runtimeId": runtime, "storedId": stored}})


@pytest.fixture
async def world() -> AsyncIterator[World]:
    w = World()
    yield w
    await w.manager.dispose_all()


async def expect(code: str, coro: Any, status: int | None = None) -> CommandError:
    with pytest.raises(CommandError) as info:
        await coro
    assert info.value.code == code
    if status is not None:
        assert info.value.status == status
    return info.value


async def call_listener(url: str, token: str, path: str, body: Any) -> tuple[int, Any]:
    async with aiohttp.ClientSession() as s, s.post(
            url + path, json=body, headers={"Authorization": f"Bearer {token}"}) as r:
        return r.status, await r.json()


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


# -- lease.close and disposal ---------------------------------------------------------------------
async def test_close_disposes_tombstones_and_unbinds(world: World) -> None:
    lease_id = await world.create()
    await world.bind(lease_id)
    lease = world.manager.lease(lease_id)
    assert lease is not None
    port, generation = lease.listener.port, lease.generation
    assert await world.manager.close({"leaseId": lease_id}) == {"ok": True}
    assert world.manager.lease(lease_id) is None and world.manager.is_tombstoned(lease_id)
    assert world.plugin.unbinds() == [{"session_id": "rt-1", "generation": generation}]
    with pytest.raises(OSError):
        await asyncio.open_connection("127.0.0.1", port)
    assert await world.manager.close({"leaseId": lease_id}) == {"ok": True}
    assert len(world.plugin.unbinds()) == 1


async def test_close_of_an_unbound_or_unknown_lease(world: World) -> None:
    lease_id = await world.create()
    await world.manager.close({"leaseId": lease_id})
    unknown = str(uuid.uuid4())
    assert await world.manager.close({"leaseId": unknown}) == {"ok": True}
    assert sorted(world.manager.tombstones()) == sorted([lease_id, unknown])
    assert world.plugin.posts == []  # never bound → no unbind
    await expect("runner_error", world.manager.close({"leaseId": "bad"}))


async def test_cancellation_overtaking_creation_leaves_no_lease_one_tombstone_no_bind(
        world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    """Anchor #20: does not recreate a lease when cancellation overtakes its admitted creation."""
    release, starting = asyncio.Event(), asyncio.Event()
    real_start = LoopbackListener.start
    started: list[LoopbackListener] = []

    async def slow_start(self: LoopbackListener) -> None:
        starting.set()
        await release.wait()
        await real_start(self)
        started.append(self)
    monkeypatch.setattr(LoopbackListener, "start", slow_start)
    payload = world.payload()
    creating = asyncio.ensure_future(world.manager.create(payload))
    await asyncio.wait_for(starting.wait(), 5)
    assert await world.manager.close({"leaseId": payload["leaseId"]}) == {"ok": True}
    release.set()
    error = await expect("runner_error", creating)
    assert error.message == "tool grant stopped"
    await expect("runner_lease_expired", world.bind(payload["leaseId"]), 410)
    assert world.manager.active() == [] and world.manager.lease(payload["leaseId"]) is None
    assert world.manager.tombstones() == [payload["leaseId"]]
    assert world.plugin.binds() == []
    with pytest.raises(OSError):  # the listener that did come up was closed at once
        await asyncio.open_connection("127.0.0.1", started[0].port)


async def test_close_during_bind_unbinds_after_the_bind_lands(world: World) -> None:
    lease_id = await world.create()
    world.plugin.gate = asyncio.Event()
    binding = asyncio.ensure_future(world.bind(lease_id))
    await asyncio.wait_for(world.plugin.entered.wait(), 5)
    await asyncio.wait_for(world.manager.close({"leaseId": lease_id}), 5)  # not blocked by bind
    world.plugin.gate.set()
    await expect("runner_lease_expired", binding)
    assert [p for p, _ in world.plugin.posts] == [BIND_PATH, UNBIND_PATH, UNBIND_PATH]


async def test_dispose_channel_only_touches_that_channel(world: World) -> None:
    a, b = await world.create(runtime="rt-1"), await world.create(runtime="rt-2")
    await world.manager.dispose_channel("conn-1")
    assert world.manager.lease(a) is None and world.manager.lease(b) is not None
    assert world.manager.is_tombstoned(a) and not world.manager.is_tombstoned(b)
    await world.manager.dispose_all()
    assert world.manager.active() == [] and world.manager.is_tombstoned(b)


async def test_a_410_from_the_relay_disposes_the_lease(world: World) -> None:
    lease_id = await world.create()
    lease = world.manager.lease(lease_id)
    assert lease is not None
    url, token = lease.listener.url, lease.listener.token
    tool = ids.opaque_id(token, "yaoyao_workspace_form_team")
    status, body = await call_listener(url, token, "/tools/call",
                                       {"toolId": tool, "arguments": {"a": 1}, "callId": "c1"})
    assert status == 200 and body["structuredContent"] == {"done": "yaoyao_workspace_form_team"}
    assert world.relay.calls == [(lease_id, "yaoyao_workspace_form_team", {"a": 1}, "c1")]
    world.relay.error = ServerError(410, "runner_lease_expired", "lease gone")
    status, body = await call_listener(url, token, "/tools/call",
                                       {"toolId": tool, "arguments": {}, "callId": "c2"})
    assert status == 200 and body["isError"] is True
    await asyncio.wait_for(world.manager.drain(), 10)   # the disposal the 410 started
    assert world.manager.lease(lease_id) is None and world.manager.is_tombstoned(lease_id)


# -- expiry and renewal --------------------------------------------------------------------------
async def test_renewal_rebinds_every_5_minutes(world: World) -> None:
    lease_id = await world.create()
    await world.bind(lease_id)
    world.clock.advance(299)
    await world.manager.tick()
    assert len(world.plugin.binds()) == 1
    world.clock.advance(1)
    await world.manager.tick()
    binds = world.plugin.binds()
    assert len(binds) == 2 and binds[1]["generation"] == binds[0]["generation"]
    assert binds[1]["expires_at"] == binds[0]["expires_at"] + 300_000
    for _ in range(12):  # an hour of renewals keeps it alive past the 30 min TTL
        world.clock.advance(300)
        await world.manager.tick()
    assert world.manager.lease(lease_id) is not None and len(world.plugin.binds()) == 14


async def test_a_failed_renewal_disposes(world: World) -> None:
    lease_id = await world.create()
    await world.bind(lease_id)
    world.plugin.replies.append((503, None))
    world.clock.advance(300)
    await world.manager.tick()
    assert world.manager.lease(lease_id) is None and world.manager.is_tombstoned(lease_id)
    assert len(world.plugin.unbinds()) == 1


async def test_renewal_disposes_a_lease_whose_session_is_gone(world: World) -> None:
    lease_id = await world.create()
    del world.sessions.owners["rt-1"]
    world.clock.advance(300)
    await world.manager.tick()
    assert world.manager.lease(lease_id) is None
    assert world.plugin.posts == []


async def test_expiry_without_renewal(world: World) -> None:
    manager = LeaseManager(relay=world.relay, plugin=world.plugin, sessions=world.sessions,
                           clock=world.clock, ttl=10.0, renew_every=100.0, auto_renew=False)
    p = world.payload()
    await manager.create(p)
    await manager.bind({"leaseId": p["leaseId"], "session": {"runtimeId": "rt-1"}})
    lease = manager.lease(p["leaseId"])
    assert lease is not None
    url, token = lease.listener.url, lease.listener.token
    world.clock.advance(10)
    status, body = await call_listener(url, token, "/tools/list", {})
    assert (status, body["code"]) == (410, "team_tools_expired")  # before any tick
    await manager.tick()
    assert manager.lease(p["leaseId"]) is None and len(world.plugin.unbinds()) == 1
    await manager.dispose_all()


async def test_the_background_timer_renews_on_the_real_clock() -> None:
    w = World()
    manager = LeaseManager(relay=w.relay, plugin=w.plugin, sessions=w.sessions,
                           ttl=5.0, renew_every=0.1)
    p = w.payload()
    await manager.create(p)
    await manager.bind({"leaseId": p["leaseId"], "session": {"runtimeId": "rt-1"}})
    await asyncio.wait_for(w.plugin.wait_binds(3), 10)   # the timer re-binds on its own
    assert len(w.plugin.binds()) >= 3
    await manager.dispose_all()
    assert manager.active() == [] and len(w.plugin.unbinds()) == 1


async def test_a_create_cancelled_or_failing_mid_start_leaves_nothing(
        world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    starting, never = asyncio.Event(), asyncio.Event()

    async def stuck_start(self: LoopbackListener) -> None:
        starting.set()
        await never.wait()
    monkeypatch.setattr(LoopbackListener, "start", stuck_start)
    payload = world.payload()
    creating = asyncio.ensure_future(world.manager.create(payload))
    await asyncio.wait_for(starting.wait(), 5)
    creating.cancel()
    with pytest.raises(asyncio.CancelledError):
        await creating
    assert world.manager.lease(payload["leaseId"]) is None

    async def broken_start(self: LoopbackListener) -> None:
        raise OSError("no ports left")
    monkeypatch.setattr(LoopbackListener, "start", broken_start)
    await expect("runner_error", world.manager.create(payload))
    assert world.manager.lease(payload["leaseId"]) is None and world.manager.active() == []
