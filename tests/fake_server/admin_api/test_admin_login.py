"""Admin API: login, session and logout (cookies, CSRF token, exact Origin, strict bodies, expiry
on the control plane's clock, non-admin accounts), the runner list and bundle reads, and the login
of a standalone ``python -m fake_server``."""
from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from pathlib import Path

import aiohttp
import pytest

from fake_server import ControlPlane, ManualClock
from fake_server.admin import CSRF_COOKIE, DEFAULT_SESSION_TTL, SESSION_COOKIE, admin_state

from .admin_client import ADMIN_PW, ALICE_PW, RUNNERS, Admin, Seen, new_admin

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


# -- a standalone fake_server ---------------------------------------------------------------------


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
