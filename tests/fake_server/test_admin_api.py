"""Admin API (protocol §7) over real loopback: sessions, CSRF, Origin, strict bodies, secrets."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import signal
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import httpx
import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, initialize, invariant, rule
from yarl import URL

from conformance.portal import Portal
from fake_server import ControlPlane, ManualClock
from fake_server.admin import CSRF_COOKIE, DEFAULT_SESSION_TTL, SESSION_COOKIE, admin_state
from tests.budget import examples

ADMIN_PW = "admin-password-for-tests-0123"
ALICE_PW = "alice-password-for-tests-0123"
RUNNERS = "/api/app/admin/runners"
UUID_ZERO = "00000000-0000-0000-0000-000000000000"
SUMMARY_KEYS = {"id", "name", "sourceNodeId", "allowedProfiles", "enabled", "createdAt", "features", "online"}


@dataclass
class Seen:
    """Every response body and header block an admin client received (scanned for secrets)."""

    bodies: list[str] = field(default_factory=list)

    def scan(self, *secrets: str) -> list[str]:
        return [s for s in secrets for b in self.bodies if s in b]


class Admin:
    """A browser-like admin client: cookie jar, same Origin, CSRF header from the login."""

    def __init__(self, cp: ControlPlane, http: aiohttp.ClientSession, seen: Seen) -> None:
        self.cp, self.http, self.seen = cp, http, seen
        self.csrf = ""

    async def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        origin: str | None = "same",
        csrf: str | None = "same",
        raw: bytes | None = None,
        content_type: str = "application/json",
    ) -> tuple[int, Any, aiohttp.ClientResponse]:
        headers: dict[str, str] = {}
        if origin == "same":
            headers["Origin"] = self.cp.url
        elif origin is not None:
            headers["Origin"] = origin
        if csrf == "same":
            headers["X-CSRF-Token"] = self.csrf
        elif csrf is not None:
            headers["X-CSRF-Token"] = csrf
        data: bytes | None = raw
        if data is None and body is not None:
            data = json.dumps(body).encode()
        if data is not None:
            headers["Content-Type"] = content_type
        async with self.http.request(method, self.cp.url + path, data=data, headers=headers) as resp:
            text = await resp.text()
            self.seen.bodies.append(text)
            self.seen.bodies.append("\n".join(f"{k}: {v}" for k, v in resp.headers.items()))
            assert resp.headers.get("Cache-Control") == "no-store", (method, path)
            payload = json.loads(text) if text else None
            if resp.status >= 400:
                assert isinstance(payload, dict) and set(payload) == {"error", "code"}, payload
            return resp.status, payload, resp

    async def login(self, user: str = "admin", password: str = ADMIN_PW) -> Any:
        status, body, _ = await self.call(
            "POST", "/api/app/login", {"username": user, "password": password}, csrf=None
        )
        assert status == 200, body
        self.csrf = body["csrfToken"]
        return body

    async def register(self, name: str, source: str | None = None, profiles: Any = None) -> tuple[int, Any]:
        body: dict[str, Any] = {"name": name, "allowedProfiles": profiles or ["default"]}
        if source is not None:
            body["sourceNodeId"] = source
        status, payload, _ = await self.call("POST", RUNNERS, body)
        return status, payload

    async def runners(self) -> Any:
        status, body, _ = await self.call("GET", RUNNERS)
        assert status == 200, body
        return body


@pytest.fixture
async def cp() -> AsyncIterator[ControlPlane]:
    async with ControlPlane(
        clock=ManualClock(), admin_user="admin", admin_password=ADMIN_PW,
        admin_profiles=("default", "research"),
    ) as plane:
        await plane.store.add_source("node-b", "Node B")
        await plane.store.add_source("paired-web", "Paired web node", paired=True)
        await plane.store.add_source("lab", "Lab", allowed_profiles=["default"])
        yield plane


@pytest.fixture
def seen() -> Seen:
    return Seen()


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    # unsafe=True: aiohttp's jar otherwise refuses cookies from an IP host such as 127.0.0.1
    async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as session:
        yield session


@pytest.fixture
async def admin(cp: ControlPlane, http: aiohttp.ClientSession, seen: Seen) -> Admin:
    client = Admin(cp, http, seen)
    await client.login()
    return client


async def new_admin(cp: ControlPlane, seen: Seen) -> tuple[Admin, aiohttp.ClientSession]:
    session = aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True))
    return Admin(cp, session, seen), session


# -- login, session, logout ----------------------------------------------------------------------


async def test_login_sets_strict_httponly_cookie_and_answers_csrf(
    cp: ControlPlane, http: aiohttp.ClientSession, seen: Seen
) -> None:
    client = Admin(cp, http, seen)
    status, body, resp = await client.call(
        "POST", "/api/app/login", {"username": "admin", "password": ADMIN_PW}, csrf=None
    )
    assert status == 200
    assert body["user"] == {"name": "admin", "isAdmin": True, "allowedProfiles": ["default", "research"]}
    assert len(body["csrfToken"]) >= 32
    cookies = {c.split("=", 1)[0]: c for c in resp.headers.getall("Set-Cookie")}
    session_cookie = cookies[SESSION_COOKIE]
    assert "HttpOnly" in session_cookie and "SameSite=Strict" in session_cookie and "Path=/" in session_cookie
    assert "SameSite=Strict" in cookies[CSRF_COOKIE]
    client.csrf = body["csrfToken"]
    status, who, _ = await client.call("GET", "/api/app/session")
    assert status == 200 and who["user"]["name"] == "admin" and who["csrfToken"] == body["csrfToken"]
    assert seen.scan(ADMIN_PW) == []


@pytest.mark.parametrize(
    ("user", "password"), [("admin", "wrong-password"), ("nobody", ADMIN_PW), ("admin", ADMIN_PW + " ")]
)
async def test_wrong_credentials_are_401_and_never_echoed(
    cp: ControlPlane, http: aiohttp.ClientSession, seen: Seen, user: str, password: str
) -> None:
    client = Admin(cp, http, seen)
    status, body, _ = await client.call(
        "POST", "/api/app/login", {"username": user, "password": password}, csrf=None
    )
    assert (status, body["code"]) == (401, "invalid_credentials")
    assert seen.scan(password) == []
    status, body, _ = await client.call("GET", "/api/app/session")
    assert (status, body["code"]) == (401, "authentication_required")


@pytest.mark.parametrize(
    ("origin", "code"),
    [(None, "invalid_origin"), ("http://evil.example", "invalid_origin"), ("null", "invalid_origin")],
)
async def test_login_needs_exact_origin(
    cp: ControlPlane, http: aiohttp.ClientSession, seen: Seen, origin: str | None, code: str
) -> None:
    client = Admin(cp, http, seen)
    status, body, _ = await client.call(
        "POST", "/api/app/login", {"username": "admin", "password": ADMIN_PW}, origin=origin, csrf=None
    )
    assert (status, body["code"]) == (403, code)


async def test_login_with_port_changed_origin_is_refused(
    cp: ControlPlane, http: aiohttp.ClientSession, seen: Seen
) -> None:
    client = Admin(cp, http, seen)
    other = cp.url.rsplit(":", 1)[0] + ":1"
    status, body, _ = await client.call(
        "POST", "/api/app/login", {"username": "admin", "password": ADMIN_PW}, origin=other, csrf=None
    )
    assert (status, body["code"]) == (403, "invalid_origin")


@pytest.mark.parametrize(
    ("raw", "ctype", "status", "code"),
    [
        (b"{not json", "application/json", 400, "invalid_json_body"),
        (b"\xff\xfe", "application/json", 400, "invalid_json_body"),
        (b"[]", "application/json", 400, "invalid_workspace_request"),
        (b'{"username":"admin"}', "application/json", 400, "invalid_workspace_request"),
        (b'{"username":"admin","password":"x","remember":true}', "application/json", 400, "invalid_workspace_request"),
        (b'{"username":1,"password":"x"}', "application/json", 400, "invalid_workspace_request"),
        (b"username=admin&password=x", "application/x-www-form-urlencoded", 415, "invalid_content_type"),
        (b"x" * (2 * 1024 * 1024 + 1), "application/json", 413, "invalid_json_body"),
        (b'{"username":"admin","password":"' + b"x" * (70 * 1024) + b'"}', "application/json", 400,
         "invalid_workspace_request"),  # over 64 KiB is fine: upstream's parser allows 2 MB
    ],
)
async def test_login_body_is_strict(
    cp: ControlPlane, http: aiohttp.ClientSession, seen: Seen, raw: bytes, ctype: str, status: int, code: str
) -> None:
    client = Admin(cp, http, seen)
    got, body, _ = await client.call("POST", "/api/app/login", raw=raw, content_type=ctype, csrf=None)
    assert (got, body["code"]) == (status, code)


async def test_logout_needs_csrf_then_ends_the_session(admin: Admin) -> None:
    status, body, _ = await admin.call("POST", "/api/app/logout", {}, csrf=None)
    assert (status, body["code"]) == (403, "invalid_csrf")
    status, body, resp = await admin.call("POST", "/api/app/logout", {})
    assert status == 200 and body == {"ok": True}
    status, body, _ = await admin.call("GET", "/api/app/session")
    assert (status, body["code"]) == (401, "authentication_required")
    status, body, _ = await admin.call("GET", RUNNERS)
    assert (status, body["code"]) == (401, "authentication_required")


async def test_session_expires_on_the_control_plane_clock(cp: ControlPlane, admin: Admin) -> None:
    assert isinstance(cp.clock, ManualClock)
    cp.clock.advance(DEFAULT_SESSION_TTL - 5)
    assert (await admin.call("GET", RUNNERS))[0] == 200
    cp.clock.advance(10)
    for method, path, body in [
        ("GET", "/api/app/session", None),
        ("GET", RUNNERS, None),
        ("POST", RUNNERS, {"name": "late", "allowedProfiles": ["default"]}),
    ]:
        status, payload, _ = await admin.call(method, path, body)
        assert (status, payload["code"]) == (401, "authentication_required"), (method, path)
    await admin.login()
    assert (await admin.call("GET", RUNNERS))[0] == 200
    assert [r["name"] for r in (await admin.runners())["runners"]] == []


async def test_expire_sessions_hook_expires_every_session(cp: ControlPlane, admin: Admin, seen: Seen) -> None:
    assert cp.app is not None
    other, session = await new_admin(cp, seen)
    try:
        await other.login()
        admin_state(cp.app).expire_sessions()
        status, body, _ = await admin.call("GET", "/api/app/session")
        assert (status, body["code"]) == (401, "authentication_required")
        status, body, _ = await other.call("GET", "/api/app/session")
        assert (status, body["code"]) == (401, "authentication_required")
    finally:
        await session.close()


async def test_non_admin_account_cannot_use_admin_routes(
    cp: ControlPlane, http: aiohttp.ClientSession, seen: Seen
) -> None:
    await cp.store.create_account("alice", allowed_profiles=["default"], password=ALICE_PW)
    alice = Admin(cp, http, seen)
    body = await alice.login("alice", ALICE_PW)
    assert body["user"]["isAdmin"] is False
    for method, path, payload in [
        ("GET", RUNNERS, None),
        ("GET", RUNNERS + "/bundle", None),
        ("POST", RUNNERS, {"name": "x", "allowedProfiles": ["default"]}),
    ]:
        status, answer, _ = await alice.call(method, path, payload)
        assert (status, answer["code"]) == (403, "admin_required"), (method, path)


# -- the list and the bundle ---------------------------------------------------------------------


async def test_list_shape_and_sources(cp: ControlPlane, admin: Admin) -> None:
    body = await admin.runners()
    assert set(body) == {"protocol", "hermesUpstream", "fixedDesktops", "bundleAvailable", "runners", "sources"}
    assert body["protocol"] == 1 and body["fixedDesktops"] is False and body["bundleAvailable"] is False
    assert body["hermesUpstream"] == ""  # upstream's default
    assert body["runners"] == []
    ids = [s["id"] for s in body["sources"]]
    assert ids[0] == "local" and "node-b" in ids and "lab" in ids and "paired-web" not in ids


async def test_bundle_is_missing(admin: Admin) -> None:
    status, body, _ = await admin.call("GET", RUNNERS + "/bundle")
    assert (status, body["code"]) == (404, "runner_bundle_missing")


async def test_unauthenticated_reads_are_401(cp: ControlPlane, http: aiohttp.ClientSession, seen: Seen) -> None:
    client = Admin(cp, http, seen)
    for path in (RUNNERS, RUNNERS + "/bundle", "/api/app/session"):
        status, body, _ = await client.call("GET", path)
        assert (status, body["code"]) == (401, "authentication_required"), path


async def test_unknown_route_and_wrong_method_answer_json(admin: Admin) -> None:
    status, body, _ = await admin.call("GET", "/api/app/admin/nothing-here")
    assert (status, body["code"]) == (404, "not_found")
    status, body, _ = await admin.call("PUT", RUNNERS, {})
    assert (status, body["code"]) == (405, "method_not_allowed")


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


# -- CSRF and Origin on every mutation -----------------------------------------------------------


async def test_mutation_checks_origin_then_csrf_then_body_then_session(
    cp: ControlPlane, http: aiohttp.ClientSession, seen: Seen, admin: Admin
) -> None:
    stranger = Admin(cp, http_stranger := aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)), seen)
    try:
        reg = {"name": "x", "allowedProfiles": ["default"]}
        # no session at all: a bad Origin is named first, then the missing CSRF (not the session)
        status, body, _ = await stranger.call("POST", RUNNERS, reg, origin="http://evil.example", csrf=None)
        assert (status, body["code"]) == (403, "invalid_origin")
        status, body, _ = await stranger.call("POST", RUNNERS, reg, csrf=None)
        assert (status, body["code"]) == (403, "invalid_csrf")
        status, body, _ = await stranger.call("DELETE", f"{RUNNERS}/{UUID_ZERO}", csrf=None)
        assert (status, body["code"]) == (403, "invalid_csrf")
    finally:
        await http_stranger.close()
    # an expired session with its CSRF token: CSRF passes, then the body, then 401
    assert cp.app is not None
    admin_state(cp.app).expire_sessions()
    status, body, _ = await admin.call("POST", RUNNERS, raw=b"{nope")
    assert (status, body["code"]) == (400, "invalid_json_body")
    status, body, _ = await admin.call("POST", RUNNERS, reg)
    assert (status, body["code"]) == (401, "authentication_required")
    status, body, _ = await admin.call("DELETE", f"{RUNNERS}/{UUID_ZERO}")
    assert (status, body["code"]) == (401, "authentication_required")


async def test_csrf_header_must_match_the_csrf_cookie(
    cp: ControlPlane, admin: Admin, http: aiohttp.ClientSession
) -> None:
    token = admin.csrf
    http.cookie_jar.update_cookies({CSRF_COOKIE: "other"}, response_url=URL(cp.url))
    status, body, _ = await admin.call("POST", RUNNERS, {"name": "x", "allowedProfiles": ["default"]})
    assert (status, body["code"]) == (403, "invalid_csrf")
    http.cookie_jar.update_cookies({CSRF_COOKIE: token}, response_url=URL(cp.url))
    status, body = await admin.register("x")
    assert status == 201, body


@pytest.mark.parametrize("csrf", [None, "", "wrong-token", "same-but-other-session"])
async def test_mutations_need_the_csrf_token(
    cp: ControlPlane, admin: Admin, seen: Seen, csrf: str | None
) -> None:
    status, created = await admin.register("victim")
    assert status == 201
    if csrf == "same-but-other-session":
        other, session = await new_admin(cp, seen)
        try:
            await other.login()
            csrf = other.csrf
        finally:
            await session.close()
    status, body, _ = await admin.call(
        "POST", RUNNERS, {"name": "x", "sourceNodeId": "node-b", "allowedProfiles": ["default"]}, csrf=csrf
    )
    assert (status, body["code"]) == (403, "invalid_csrf")
    status, body, _ = await admin.call("DELETE", f"{RUNNERS}/{created['runner']['id']}", csrf=csrf)
    assert (status, body["code"]) == (403, "invalid_csrf")
    listed = (await admin.runners())["runners"]
    assert [(r["name"], r["enabled"]) for r in listed] == [("victim", True)]


@pytest.mark.parametrize("origin", [None, "http://evil.example", "null", "HTTP://127.0.0.1"])
async def test_cross_origin_mutations_are_refused(admin: Admin, origin: str | None) -> None:
    status, created = await admin.register("victim")
    assert status == 201
    status, body, _ = await admin.call(
        "POST", RUNNERS, {"name": "x", "sourceNodeId": "node-b", "allowedProfiles": ["default"]}, origin=origin
    )
    assert (status, body["code"]) == (403, "invalid_origin")
    status, body, _ = await admin.call("DELETE", f"{RUNNERS}/{created['runner']['id']}", origin=origin)
    assert (status, body["code"]) == (403, "invalid_origin")
    status, body, _ = await admin.call("POST", "/api/app/logout", {}, origin=origin)
    assert (status, body["code"]) == (403, "invalid_origin")
    listed = (await admin.runners())["runners"]
    assert [(r["name"], r["enabled"]) for r in listed] == [("victim", True)]


# -- disable -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "runner_id", ["00000000-0000-0000-0000-000000000000", "not-a-uuid", "x" * 300]
)
async def test_delete_unknown_runner_is_404(admin: Admin, runner_id: str) -> None:
    status, body, _ = await admin.call("DELETE", f"{RUNNERS}/{runner_id}")
    assert (status, body["code"]) == (404, "workspace_not_found")


async def test_disable_keeps_the_record_and_is_idempotent(cp: ControlPlane, admin: Admin) -> None:
    status, created = await admin.register("r")
    runner_id = created["runner"]["id"]
    for _ in range(2):
        status, body, _ = await admin.call("DELETE", f"{RUNNERS}/{runner_id}")
        assert (status, body) == (200, {"ok": True})
    listed = (await admin.runners())["runners"]
    assert [(r["id"], r["enabled"]) for r in listed] == [(runner_id, False)]
    record = await cp.store.get_runner(runner_id)
    assert record is not None and record.enabled is False


async def test_disable_wakes_the_held_poll_and_refuses_the_runner(
    cp: ControlPlane, admin: Admin, http: aiohttp.ClientSession
) -> None:
    status, created = await admin.register("live")
    runner_id, token = created["runner"]["id"], created["token"]
    poll_url = f"{cp.url}/api/runner/v1/{runner_id}/poll"
    headers = {
        "Authorization": f"Bearer {token}",
        "x-runner-instance": "6f1f3c1e-7f5e-4a53-9d0a-0a3d5c1f2b11",
        "x-runner-protocol": "1",
        "x-runner-features": "credential-ref-v1",
        "x-runner-reset": "1",
    }
    async with aiohttp.ClientSession() as runner_http:  # no cookies, no Origin: a runner
        async with runner_http.get(poll_url, headers=headers) as resp:
            assert resp.status == 200, await resp.text()
        listed = (await admin.runners())["runners"]
        assert listed[0]["online"] is True and listed[0]["features"] == ["credential-ref-v1"]
        held_headers = {k: v for k, v in headers.items() if k != "x-runner-reset"}
        held = asyncio.ensure_future(runner_http.get(poll_url, headers=held_headers))
        try:
            # the hold lasts poll_hold on a ManualClock that never moves: only the disable ends it
            first = cp.history.filter(route="poll", runner_id=runner_id)[0]
            await cp.history.wait_for(lambda ex: ex.route == "poll" and ex.runner_id == runner_id,
                                      timeout=5, after_seq=first.seq)
            assert not held.done()
            status, body, _ = await admin.call("DELETE", f"{RUNNERS}/{runner_id}")
            assert (status, body) == (200, {"ok": True})
            async with asyncio.timeout(10):
                resp = await held
            assert resp.status == 409, await resp.text()
            assert (await resp.json())["code"] == "runner_instance_changed"
            resp.release()
        finally:
            held.cancel()
        async with runner_http.get(poll_url, headers=headers) as resp:
            assert resp.status == 403
            assert (await resp.json())["code"] == "runner_unauthorized"
    listed = (await admin.runners())["runners"]
    assert listed[0]["online"] is False and listed[0]["enabled"] is False


async def test_standalone_fake_server_login_answers_csrf(tmp_path: Path) -> None:
    """``python -m fake_server --admin-user … --admin-password …``: the page's login works."""
    ready = tmp_path / "ready.json"
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "fake_server", "--port", "0", "--ready-file", str(ready),
        "--admin-user", "root", "--admin-password", ADMIN_PW, "--db", str(tmp_path / "cp.sqlite3"),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, start_new_session=True,
    )
    try:
        assert proc.stdout is not None
        async with asyncio.timeout(20):   # the child prints its ready line, or exits (EOF)
            line = await proc.stdout.readline()
        assert line.startswith(b"FAKE_SERVER_READY url="), "fake_server exited early"
        url = json.loads(ready.read_text())["url"]
        async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as http:
            async with http.post(
                url + "/api/app/login", json={"username": "root", "password": ADMIN_PW}, headers={"Origin": url}
            ) as resp:
                assert resp.status == 200
                csrf = (await resp.json())["csrfToken"]
            async with http.post(
                url + RUNNERS, json={"name": "standalone", "allowedProfiles": ["default"]},
                headers={"Origin": url, "X-CSRF-Token": csrf},
            ) as resp:
                assert resp.status == 201, await resp.text()
    finally:
        if proc.returncode is None:
            os.killpg(proc.pid, signal.SIGTERM)
        async with asyncio.timeout(20):
            out, err = await proc.communicate()
    assert proc.returncode == 0
    assert ADMIN_PW.encode() not in out + err


# -- a state machine over the admin API (real sockets; the server runs on its own loop) -----------


async def _fresh_plane() -> tuple[ControlPlane, ControlPlane]:
    cm = ControlPlane(admin_user="admin", admin_password=ADMIN_PW)
    cp = await cm.__aenter__()
    await cp.store.create_account("admin2", allowed_profiles=["default"], is_admin=True, password=ALICE_PW)
    await cp.store.add_source("node-b", "Node B")
    return cm, cp


class _SyncAdmin:
    def __init__(self, url: str, user: str, password: str) -> None:
        self.url, self.user, self.password = url, user, password
        self.http = httpx.Client(base_url=url, headers={"Origin": url}, timeout=10)
        self.csrf = ""
        self.bodies: list[tuple[int, str]] = []

    def login(self) -> None:
        r = self.http.post("/api/app/login", json={"username": self.user, "password": self.password})
        assert r.status_code == 200, r.text
        self.csrf = r.json()["csrfToken"]

    def send(self, method: str, path: str, body: Any = None, **headers: str) -> tuple[int, Any]:
        hdrs = {"X-CSRF-Token": self.csrf, **headers}
        r = self.http.request(method, path, json=body, headers=hdrs)
        self.bodies.append((r.status_code, r.text))
        return r.status_code, r.json()


def test_admin_api_state_machine() -> None:
    """Registrations, disables, refused mutations and expired sessions by two admins, in any
    order: the list always equals the model, each source owner has at most one enabled runner,
    and no list ever carries a token or its hash. Each example gets a fresh control plane."""
    bg = Portal("admin-machine").start()

    class AdminApi(RuleBasedStateMachine):
        runners = Bundle("runners")

        @initialize()
        def start(self) -> None:
            self.cm, self.cp = bg.run(_fresh_plane(), timeout=30)
            self.admins = {
                "admin": _SyncAdmin(self.cp.url, "admin", ADMIN_PW),
                "admin2": _SyncAdmin(self.cp.url, "admin2", ALICE_PW),
            }
            for a in self.admins.values():
                a.login()
            self.model: dict[str, dict[str, Any]] = {}
            self.owner: dict[str, str] = {}
            self.tokens: list[str] = []
            self.n = 0

        def teardown(self) -> None:
            if hasattr(self, "cm"):
                for a in self.admins.values():
                    a.http.close()
                bg.run(self.cm.__aexit__(None, None, None), timeout=30)

        def _enabled_owner(self, source: str, owner: str) -> bool:
            return any(
                r["enabled"] and r["sourceNodeId"] == source and self.owner[i] == owner
                for i, r in self.model.items()
            )

        @rule(target=runners, who=st.sampled_from(["admin", "admin2"]), source=st.sampled_from(["local", "node-b"]))
        def register(self, who: str, source: str) -> str:
            self.n += 1
            owner = "_system" if source == "local" else who
            busy = self._enabled_owner(source, owner)
            status, body = self.admins[who].send(
                "POST", RUNNERS, {"name": f"r{self.n}", "sourceNodeId": source, "allowedProfiles": ["default"]}
            )
            if busy:
                assert (status, body["code"]) == (409, "runner_source_in_use")
                return ""
            assert status == 201, body
            self.model[body["runner"]["id"]] = body["runner"]
            self.owner[body["runner"]["id"]] = owner
            self.tokens.append(body["token"])
            return str(body["runner"]["id"])

        @rule(runner=runners, who=st.sampled_from(["admin", "admin2"]))
        def disable(self, runner: str, who: str) -> None:
            status, body = self.admins[who].send("DELETE", f"{RUNNERS}/{runner or UUID_ZERO}")
            if not runner:
                assert (status, body["code"]) == (404, "workspace_not_found")
                return
            assert (status, body) == (200, {"ok": True})
            self.model[runner]["enabled"] = False

        @rule(runner=runners, how=st.sampled_from(["no-csrf", "wrong-csrf", "evil-origin", "no-origin"]))
        def refused_disable(self, runner: str, how: str) -> None:
            a = self.admins["admin"]
            headers = {
                "no-csrf": {"X-CSRF-Token": ""},
                "wrong-csrf": {"X-CSRF-Token": a.csrf[::-1]},
                "evil-origin": {"Origin": "http://evil.example"},
                "no-origin": {"Origin": ""},
            }[how]
            status, body = a.send("DELETE", f"{RUNNERS}/{runner or UUID_ZERO}", **headers)
            want = "invalid_csrf" if how.endswith("csrf") else "invalid_origin"
            assert (status, body["code"]) == (403, want)

        @rule(who=st.sampled_from(["admin", "admin2"]))
        def sessions_expire(self, who: str) -> None:
            assert self.cp.app is not None
            bg.run(_call(admin_state(self.cp.app).expire_sessions), timeout=30)
            status, body = self.admins[who].send("GET", RUNNERS)
            assert (status, body["code"]) == (401, "authentication_required")
            for a in self.admins.values():
                a.login()

        @invariant()
        def list_equals_model(self) -> None:
            status, body = self.admins["admin"].send("GET", RUNNERS)
            assert status == 200
            got = {r["id"]: (r["name"], r["sourceNodeId"], r["enabled"]) for r in body["runners"]}
            want = {i: (r["name"], r["sourceNodeId"], r["enabled"]) for i, r in self.model.items()}
            assert got == want

        @invariant()
        def one_enabled_runner_per_source_owner(self) -> None:
            pairs = [(r["sourceNodeId"], self.owner[i]) for i, r in self.model.items() if r["enabled"]]
            assert len(pairs) == len(set(pairs))

        @invariant()
        def no_token_outside_its_201(self) -> None:
            secrets = self.tokens + [hashlib.sha256(t.encode()).hexdigest() for t in self.tokens]
            for a in self.admins.values():
                for status, text in a.bodies:
                    if status == 201:
                        continue  # a registration answer: the one place its token may be
                    assert not any(s in text for s in secrets)
                a.bodies.clear()

    try:
        AdminApi.TestCase.settings = settings(max_examples=examples(ci=4), stateful_step_count=10)
        AdminApi.TestCase().runTest()
    finally:
        bg.close()


async def _call(fn: Any) -> Any:
    return fn()
