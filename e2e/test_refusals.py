"""e2e 4 and the plain error messages: one enabled runner per source, CSRF, Origin (including a
real cross-origin page that shares the site's cookies), invalid profiles, session expiry, and the
client-side address rules."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiohttp import web
from playwright.sync_api import expect

from fake_server.admin import admin_state

from .e2e_support import LiveServer, Tab, fill_registration, login, register, runner_item, shot

pytestmark = pytest.mark.e2e

RUNNERS = "/api/app/admin/runners"


def _names(server: LiveServer) -> list[str]:
    return [r.name for r in server.runners()]


def test_one_enabled_runner_per_source_is_shown_plainly(
    server: LiveServer, tab: Tab, tmp_path: Path, artifacts: Path
) -> None:
    page = tab.page
    login(page, server.url)
    register(page, tmp_path / "a", "first")
    page.get_by_role("button", name="Done").click()
    expect(page.locator("#config-card")).to_be_hidden()

    fill_registration(page, "second", source="local")
    page.get_by_role("button", name="Register node").click()
    banner = page.get_by_role("alert")
    expect(banner).to_contain_text("already has an enabled execution node")
    expect(banner).to_contain_text("runner_source_in_use")
    expect(page.get_by_role("button", name="Download runner.json")).to_have_count(0)
    shot(page, artifacts, "error-source-in-use-1280")
    assert _names(server) == ["first"]

    # another source is fine
    register(page, tmp_path / "b", "second", source="node-b")
    assert _names(server) == ["first", "second"]


def test_invalid_profile_is_shown_plainly(server: LiveServer, tab: Tab) -> None:
    page = tab.page
    # upstream lets admins assign any profile; the harness's opt-in check refuses this one
    server.call(lambda: setattr(admin_state(server.cp.app), "restrict_profiles", True))
    login(page, server.url)
    fill_registration(page, "node", profiles="default, finance")
    page.get_by_role("button", name="Register node").click()
    expect(page.get_by_role("alert")).to_contain_text("Invalid profile")
    expect(page.get_by_role("alert")).to_contain_text("runner_profile_forbidden")
    # a malformed profile is caught before any request
    fill_registration(page, "node", profiles="team/one")
    page.get_by_role("button", name="Register node").click()
    expect(page.locator("#reg-profiles-error")).to_contain_text("cannot contain")
    expect(page.get_by_label("Allowed profiles")).to_be_focused()
    assert _names(server) == []


def test_missing_or_wrong_csrf_and_foreign_origin_are_403(server: LiveServer, tab: Tab, tmp_path: Path) -> None:
    page, api = tab.page, tab.context.request
    login(page, server.url)
    victim = register(page, tmp_path / "v", "victim")
    csrf = api.get(server.url + "/api/app/session").json()["csrfToken"]
    body = json.dumps({"name": "x", "sourceNodeId": "node-b", "allowedProfiles": ["default"]})
    same = {"Origin": server.url, "Content-Type": "application/json"}
    delete_url = f"{server.url}{RUNNERS}/{victim.config['runnerId']}"
    cases = [
        ({**same}, 403, "invalid_csrf"),
        ({**same, "X-CSRF-Token": ""}, 403, "invalid_csrf"),
        ({**same, "X-CSRF-Token": csrf[:-2] + "xx"}, 403, "invalid_csrf"),
        ({**same, "X-CSRF-Token": csrf, "Origin": "http://evil.example"}, 403, "invalid_origin"),
        ({"Content-Type": "application/json", "X-CSRF-Token": csrf}, 403, "invalid_origin"),
    ]
    for headers, status, code in cases:
        for resp in (
            api.post(server.url + RUNNERS, data=body, headers=headers),
            api.delete(delete_url, headers=headers),
        ):
            assert (resp.status, resp.json()["code"]) == (status, code), headers
    # the page's own fetch without the header is refused too
    answer = page.evaluate(
        """url => fetch(url, {method: 'DELETE'}).then(async r => [r.status, (await r.json()).code])""",
        delete_url,
    )
    assert answer == [403, "invalid_csrf"]
    assert [(r.name, r.enabled) for r in server.runners()] == [("victim", True)]
    # with both, it works
    ok = api.delete(delete_url, headers={**same, "X-CSRF-Token": csrf})
    assert ok.status == 200 and ok.json() == {"ok": True}


@pytest.fixture
def evil_site(server: LiveServer) -> Iterator[str]:
    """Another origin on the same host (same *site*: SameSite cookies are still sent)."""

    async def page(_: web.Request) -> web.Response:
        return web.Response(text="<!doctype html><title>evil</title><p>hi</p>", content_type="text/html")

    async def up() -> tuple[web.AppRunner, str]:
        app = web.Application()
        app.router.add_get("/", page)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = runner.addresses[0][1]
        return runner, f"http://127.0.0.1:{port}"

    runner, url = server.run(up())
    try:
        yield url
    finally:
        server.run(runner.cleanup())


def test_cross_origin_page_cannot_register_or_disable(
    server: LiveServer, tab: Tab, tmp_path: Path, evil_site: str
) -> None:
    page = tab.page
    login(page, server.url)
    victim = register(page, tmp_path / "v", "victim")
    csrf = tab.context.request.get(server.url + "/api/app/session").json()["csrfToken"]
    page.goto(evil_site + "/")
    # simple (no-preflight) requests carrying the session cookie and even a stolen CSRF token
    # in the body: only the Origin check stands between them and the admin API
    with page.expect_response(lambda r: r.request.method == "POST" and RUNNERS in r.url) as posted:
        page.evaluate(
            """([url, csrf]) => fetch(url, {method: 'POST', mode: 'no-cors', credentials: 'include',
                 headers: {'Content-Type': 'text/plain'},
                 body: JSON.stringify({name: 'evil', sourceNodeId: 'node-b', allowedProfiles: ['default'], csrf})})""",
            [server.url + RUNNERS, csrf],
        )
    assert posted.value.status == 403
    seen = server.call(lambda: [x for x in admin_state(server.cp.app).log if x.origin == evil_site])
    # the browser sent the session cookie (same site), and the Origin gate refused it
    assert [(x.method, x.had_session_cookie, x.status, x.code) for x in seen] == [
        ("POST", True, 403, "invalid_origin")
    ]
    # a CORS request with the right header gets no further (preflight or Origin refuses it)
    result = page.evaluate(
        """([url, csrf]) => fetch(url, {method: 'DELETE', credentials: 'include',
             headers: {'X-CSRF-Token': csrf}}).then(r => r.status, e => 'blocked')""",
        [f"{server.url}{RUNNERS}/{victim.config['runnerId']}", csrf],
    )
    assert result == "blocked"
    seen = server.call(lambda: [x for x in admin_state(server.cp.app).log if x.origin == evil_site])
    # the preflight is refused, so the DELETE itself is never sent
    assert [(x.method, x.status) for x in seen] == [("POST", 403), ("OPTIONS", 405)]
    assert [(r.name, r.enabled) for r in server.runners()] == [("victim", True)]


def test_session_expiry_is_shown_plainly_and_signing_in_again_works(
    server: LiveServer, tab: Tab, artifacts: Path
) -> None:
    page = tab.page
    login(page, server.url)
    server.call(lambda: admin_state(server.cp.app).expire_sessions())
    page.get_by_role("button", name="Refresh").click()
    expect(page.get_by_role("alert")).to_contain_text("your session has expired")
    expect(page.get_by_role("alert")).to_contain_text("authentication_required")
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    expect(page.get_by_label("User name")).to_be_focused()
    shot(page, artifacts, "error-session-expired-1280")
    # a mutation after expiry says the same, and nothing is created
    login(page, server.url)
    server.call(lambda: admin_state(server.cp.app).expire_sessions())
    fill_registration(page, "late")
    page.get_by_role("button", name="Register node").click()
    expect(page.get_by_role("alert")).to_contain_text("your session has expired")
    assert _names(server) == []
    login(page, server.url)
    expect(page.get_by_role("button", name="Register node")).to_be_enabled()


ADDRESS_CASES = [
    ("Hermes address on the node", "http://localhost:9119", "127.0.0.1 or [::1]"),
    ("Hermes address on the node", "http://10.0.0.5:9119", "127.0.0.1 or [::1]"),
    ("Hermes address on the node", "http://user:pw@127.0.0.1:9119", "user name or password"),
    ("Hermes address on the node", "ftp://127.0.0.1/", "http:// or https://"),
    ("Hermes address on the node", "http://127.0.0.1:9119/?x=1", "query or fragment"),
    ("Yaoyao address reachable from the node", "http://192.168.1.20:8080", "needs HTTPS"),
    ("Yaoyao address reachable from the node", "https://yaoyao.example.com/app", "no path"),
    ("Yaoyao address reachable from the node", "https://yaoyao.example.com/?x=1", "no path"),
    ("Yaoyao address reachable from the node", "not a url", "full address"),
    ("Node name", "   ", "Enter a name"),
]


def test_addresses_are_checked_like_the_runner_would(server: LiveServer, tab: Tab) -> None:
    page = tab.page
    login(page, server.url)
    fill_registration(page, "node")
    for field, value, error in ADDRESS_CASES:
        control = page.get_by_label(field)
        good = control.input_value()
        control.fill(value)
        page.get_by_role("button", name="Register node").click()
        expect(control).to_be_focused()
        expect(control).to_have_attribute("aria-invalid", "true")
        expect(page.locator("#register-form .field-error:visible")).to_contain_text(error)
        control.fill(good)
    page.get_by_role("button", name="Register node").click()
    expect(page.get_by_role("button", name="Download runner.json")).to_be_visible()
    expect(page.locator("#register-form .field-error:visible")).to_have_count(0)
    assert _names(server) == ["node"]


def test_remote_https_and_ipv6_loopback_go_into_the_file(server: LiveServer, tab: Tab, tmp_path: Path) -> None:
    page = tab.page
    login(page, server.url)
    reg = register(
        page, tmp_path / "r", "remote", server_url="https://yaoyao.example.com/",
        hermes_url="http://[::1]:9119",
    )
    assert reg.config["serverURL"] == "https://yaoyao.example.com"
    assert reg.config["hermesURL"] == "http://[::1]:9119"
    expect(runner_item(page, "remote")).to_be_visible()


def test_closing_the_config_card_without_downloading_asks_first(
    server: LiveServer, tab: Tab
) -> None:
    page = tab.page
    login(page, server.url)
    fill_registration(page, "forgotten")
    page.get_by_role("button", name="Register node").click()
    expect(page.get_by_role("button", name="Download runner.json")).to_be_visible()
    page.get_by_role("button", name="Done").click()
    dialog = page.get_by_role("dialog")
    expect(dialog).to_contain_text("Close without downloading?")
    dialog.get_by_role("button", name="Cancel").click()
    expect(page.get_by_role("button", name="Download runner.json")).to_be_visible()
    page.get_by_role("button", name="Done").click()
    dialog.get_by_role("button", name="Close anyway").click()
    expect(page.locator("#config-card")).to_be_hidden()
    # the token is gone for good: no way back to it in the page
    expect(page.get_by_role("button", name="Download runner.json")).to_have_count(0)
    assert _names(server) == ["forgotten"]
