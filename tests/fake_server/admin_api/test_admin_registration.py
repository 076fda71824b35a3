"""Admin API: runner registration (the token once in its 201, never in a list; strict bodies;
profiles; sources; one enabled runner per source, also under racing registrations)."""
from __future__ import annotations

import asyncio
import hashlib
import json
from typing import Any

import pytest

from fake_server import ControlPlane
from fake_server.admin import admin_state

from .admin_client import RUNNERS, SUMMARY_KEYS, Admin, Seen, new_admin

# -- registration --------------------------------------------------------------------------------


async def test_register_answers_201_with_the_token_once(cp: ControlPlane, admin: Admin, seen: Seen) -> None:
    status, body = await admin.register("build-box", profiles=["default", "research", "default"])
    assert status == 201, body
    assert set(body) == {"runner", "token"}
    runner, token = body["runner"], body["token"]
    assert set(runner) == SUMMARY_KEYS
    assert runner["name"] == "build-box" and runner["sourceNodeId"] == "local"
    assert runner["allowedProfiles"] == ["default", "research"]
    assert runner["enabled"] is True and runner["online"] is False and runner["features"] == []
    assert 32 <= len(token) <= 4096
    listed = (await admin.runners())["runners"]
    assert listed == [runner]
    record = await cp.store.get_runner(runner["id"])
    assert record is not None and record.token_hash == hashlib.sha256(token.encode()).hexdigest()
    # the token appears in exactly one response: the 201
    assert sum(token in b for b in seen.bodies) == 1


async def test_list_never_holds_a_token_or_its_hash(cp: ControlPlane, admin: Admin, seen: Seen) -> None:
    tokens = []
    for name, source in [("one", "local"), ("two", "node-b"), ("three", "lab")]:
        status, body = await admin.register(name, source)
        assert status == 201, body
        tokens.append(body["token"])
        seen.bodies.clear()  # the 201 is the one place the token may appear
        await admin.runners()
        await admin.call("GET", "/api/app/session")
        await admin.register(name, source)  # 409: error bodies must not leak either
        await admin.call("DELETE", f"{RUNNERS}/00000000-0000-0000-0000-000000000000")
        secrets = [t for t in tokens] + [hashlib.sha256(t.encode()).hexdigest() for t in tokens]
        assert seen.scan(*secrets) == []
    for runner in (await admin.runners())["runners"]:
        assert set(runner) == SUMMARY_KEYS
    assert "tokenHash" not in seen.bodies[-2] and "sourceOwner" not in seen.bodies[-2]


@pytest.mark.parametrize(
    "body",
    [
        {"name": "x", "allowedProfiles": ["default"], "command": "rm -rf /"},
        {"name": "", "allowedProfiles": ["default"]},
        {"name": "   ", "allowedProfiles": ["default"]},
        {"name": "n" * 101, "allowedProfiles": ["default"]},
        {"name": 7, "allowedProfiles": ["default"]},
        {"allowedProfiles": ["default"]},
        {"name": "x"},
        {"name": "x", "allowedProfiles": []},
        {"name": "x", "allowedProfiles": "default"},
        {"name": "x", "allowedProfiles": ["p"] * 257},
        {"name": "x", "allowedProfiles": [""]},
        {"name": "x", "allowedProfiles": ["p" * 101]},
        {"name": "x", "allowedProfiles": [1]},
        {"name": "x", "sourceNodeId": 5, "allowedProfiles": ["default"]},
        {"name": "x", "sourceNodeId": "", "allowedProfiles": ["default"]},
        ["name", "x"],
        "x",
        None,
    ],
)
async def test_registration_body_is_strict(admin: Admin, body: Any) -> None:
    status, payload, _ = await admin.call("POST", RUNNERS, raw=json.dumps(body).encode())
    assert (status, payload["code"]) == (400, "invalid_workspace_request")
    assert (await admin.runners())["runners"] == []


@pytest.mark.parametrize("profiles", [["a/b"], ["default", "a\\b"], ["a\nb"], ["   "], ["x\x00"]])
async def test_profile_validator_refuses_with_invalid_assigned_profiles(admin: Admin, profiles: list[str]) -> None:
    status, payload = await admin.register("x", profiles=profiles)
    assert (status, payload["code"]) == (400, "invalid_assigned_profiles")
    assert (await admin.runners())["runners"] == []


async def test_source_node_id_is_not_trimmed(admin: Admin) -> None:
    status, body = await admin.register("x", source=" local ")
    assert (status, body["code"]) == (404, "workspace_not_found")
    status, body = await admin.register("x", source="local")
    assert status == 201, body


async def test_registration_needs_json(admin: Admin) -> None:
    status, body, _ = await admin.call("POST", RUNNERS, raw=b'{"name": "x",')
    assert (status, body["code"]) == (400, "invalid_json_body")
    status, body, _ = await admin.call("POST", RUNNERS, raw=b"name=x", content_type="text/plain")
    assert (status, body["code"]) == (415, "invalid_content_type")


async def test_admins_may_assign_any_profile_by_default(admin: Admin) -> None:
    status, body = await admin.register("x", source="lab", profiles=["default", "finance"])
    assert status == 201, body
    assert body["runner"]["allowedProfiles"] == ["default", "finance"]


async def test_profiles_outside_account_or_source_are_forbidden_when_opted_in(
    cp: ControlPlane, admin: Admin
) -> None:
    assert cp.app is not None
    admin_state(cp.app).restrict_profiles = True
    status, body = await admin.register("x", profiles=["default", "finance"])
    assert (status, body["code"]) == (403, "runner_profile_forbidden")
    status, body = await admin.register("x", source="lab", profiles=["research"])
    assert (status, body["code"]) == (403, "runner_profile_forbidden")
    status, body = await admin.register("x", source="lab", profiles=["default"])
    assert status == 201, body


async def test_unknown_and_paired_sources(admin: Admin) -> None:
    status, body = await admin.register("x", source="no-such-source")
    assert (status, body["code"]) == (404, "workspace_not_found")
    status, body = await admin.register("x", source="paired-web")
    assert (status, body["code"]) == (409, "runner_source_invalid")


async def test_one_enabled_runner_per_source(admin: Admin) -> None:
    status, first = await admin.register("first")
    assert status == 201
    status, body = await admin.register("second")
    assert (status, body["code"]) == (409, "runner_source_in_use")
    status, other = await admin.register("elsewhere", source="node-b")
    assert status == 201
    status, body, _ = await admin.call("DELETE", f"{RUNNERS}/{first['runner']['id']}")
    assert (status, body) == (200, {"ok": True})
    status, again = await admin.register("replacement")
    assert status == 201 and again["token"] != first["token"]
    listed = {r["name"]: r["enabled"] for r in (await admin.runners())["runners"]}
    assert listed == {"first": False, "elsewhere": True, "replacement": True}


async def test_racing_registrations_on_one_source_have_one_winner(cp: ControlPlane, seen: Seen) -> None:
    clients = []
    try:
        for _ in range(2):
            client, session = await new_admin(cp, seen)
            clients.append((client, session))
            await client.login()
        results = await asyncio.gather(
            *(c.register(f"racer-{i}", source="node-b") for i, (c, _) in enumerate(clients * 3))
        )
        statuses = sorted(s for s, _ in results)
        assert statuses == [201, 409, 409, 409, 409, 409]
        assert {b["code"] for s, b in results if s == 409} == {"runner_source_in_use"}
        listed = (await clients[0][0].runners())["runners"]
        assert len([r for r in listed if r["enabled"]]) == 1
    finally:
        for _, session in clients:
            await session.close()
