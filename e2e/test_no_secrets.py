"""e2e 2: the list never holds a token or its hash — API responses, the DOM, the source after reload."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Page, Route, expect

from fake_server.admin_page import STATIC_FILES

from .e2e_support import LiveServer, Tab, fill_registration, login, runner_item

pytestmark = pytest.mark.e2e

# Everything the page can hold: serialized DOM (text + attributes), form values, storage, cookies.
DOM_DUMP = """() => JSON.stringify({
  html: document.documentElement.outerHTML,
  values: Array.from(document.querySelectorAll('input, select, textarea')).map(e => e.value),
  local: Object.entries(localStorage), session: Object.entries(sessionStorage),
  cookie: document.cookie,
  hrefs: Array.from(document.querySelectorAll('[href], [src]')).map(e => e.href || e.src),
})"""


class Recorder:
    """Passes every /api/ exchange through and keeps its body."""

    def __init__(self, page: Page) -> None:
        self.bodies: list[tuple[str, str, int, str]] = []
        page.route("**/api/**", self._handle)

    def _handle(self, route: Route) -> None:
        response = route.fetch()
        text = response.text()
        self.bodies.append((route.request.method, route.request.url, response.status, text))
        route.fulfill(response=response)


def _secrets(tokens: list[str]) -> list[str]:
    return tokens + [hashlib.sha256(t.encode()).hexdigest() for t in tokens]


def _assert_clean(where: str, text: str, tokens: list[str]) -> None:
    for secret in _secrets(tokens):
        assert secret not in text, f"a token or its hash is in {where}"
    assert "tokenHash" not in text and "sourceOwner" not in text, where


def _register_checking_dom(page: Page, tokens: list[str], name: str, source: str) -> dict[str, Any]:
    fill_registration(page, name, source=source)
    page.get_by_role("button", name="Register node").click()
    expect(page.get_by_role("button", name="Download runner.json")).to_be_visible()
    # between the 201 and the download the token lives only in a closure variable
    pending = page.evaluate("() => fetch('/api/app/admin/runners').then(r => r.json())")
    new = [r for r in pending["runners"] if r["name"] == name][0]
    with page.expect_download() as info:
        page.get_by_role("button", name="Download runner.json").click()
    config = json.loads(Path(info.value.path()).read_text())
    assert config["runnerId"] == new["id"]
    tokens.append(config["token"])
    _assert_clean("the DOM right after registration", page.evaluate(DOM_DUMP), tokens)
    return config


def test_no_token_or_hash_in_api_dom_or_source(server: LiveServer, tab: Tab) -> None:
    page, ctx = tab.page, tab.context
    recorder = Recorder(page)
    login(page, server.url)
    tokens: list[str] = []

    # the DOM before the download: a token must not be there even transiently
    fill_registration(page, "alpha", source="local")
    page.get_by_role("button", name="Register node").click()
    expect(page.get_by_role("button", name="Download runner.json")).to_be_visible()
    created = [b for b in recorder.bodies if b[0] == "POST" and b[2] == 201]
    assert len(created) == 1
    first_token = json.loads(created[0][3])["token"]
    _assert_clean("the DOM before download", page.evaluate(DOM_DUMP), [first_token])
    with page.expect_download() as info:
        page.get_by_role("button", name="Download runner.json").click()
    assert json.loads(Path(info.value.path()).read_text())["token"] == first_token
    tokens.append(first_token)
    _assert_clean("the DOM after download", page.evaluate(DOM_DUMP), tokens)
    # one download only: the button is gone and nothing can re-create the file
    expect(page.get_by_role("button", name="Download runner.json")).to_have_count(0)

    _register_checking_dom(page, tokens, "beta", "node-b")
    page.get_by_role("button", name="Refresh").click()
    expect(runner_item(page, "beta")).to_be_visible()

    # every API body the page saw: only the two 201s carry a token, and never a hash
    for method, url, status, text in recorder.bodies:
        if method == "POST" and status == 201:
            assert sum(t in text for t in tokens) == 1
            _assert_clean(url, text.replace(json.loads(text)["token"], ""), tokens)
        else:
            _assert_clean(f"{method} {url}", text, tokens)

    # the API read directly with the same session
    listing = ctx.request.get(server.url + "/api/app/admin/runners")
    assert listing.status == 200
    _assert_clean("GET /api/app/admin/runners", listing.text(), tokens)
    assert {r["name"] for r in listing.json()["runners"]} == {"alpha", "beta"}

    # after a reload: the served source, the rebuilt DOM, cookies
    page.reload()
    expect(runner_item(page, "alpha")).to_be_visible()
    expect(runner_item(page, "beta")).to_be_visible()
    _assert_clean("the DOM after reload", page.evaluate(DOM_DUMP), tokens)
    _assert_clean("page.content() after reload", page.content(), tokens)
    for path in ("/admin/", *(f"/admin/static/{name}" for name in sorted(STATIC_FILES))):
        _assert_clean(path, ctx.request.get(server.url + path).text(), tokens)
    _assert_clean("cookies", json.dumps(ctx.cookies()), tokens)
    assert tab.errors == []
