"""Admin API: CSRF and Origin on every mutation (in the gates' order), and disabling a runner
(404 for unknown ids, idempotent, wakes the held poll and refuses the runner)."""
from __future__ import annotations

import asyncio

import aiohttp
import pytest
from yarl import URL

from fake_server import ControlPlane
from fake_server.admin import CSRF_COOKIE, admin_state

from .admin_client import RUNNERS, UUID_ZERO, Admin, Seen, new_admin

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
