"""The LeaseManager's world for its tests: an in-memory Relay, PluginClient and SessionDirectory,
a fake clock, and the calls the tests make (``expect`` a CommandError, ``call_listener``)."""
from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import aiohttp
import pytest

from runner_ref.errors import CommandError
from runner_ref.teamtools.leases import BIND_PATH, UNBIND_PATH, LeaseManager

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
