"""e2e 6: two administrators at once (two browser contexts) — concurrent registrations and
disables leave one consistent list and lose no update."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from .e2e_support import (
    SECOND_ADMIN,
    SECOND_PW,
    LiveServer,
    Tab,
    fill_registration,
    login,
    runner_item,
    shot,
)

pytestmark = pytest.mark.e2e

LIST_STATE = """() => Array.from(document.querySelectorAll('li.runner')).map(li => [
  li.dataset.runnerId, li.querySelector('.runner-name').textContent,
  li.querySelector('.runner-head').textContent.includes('Enabled')])"""


def _listed(page: Page) -> list[list[object]]:
    page.get_by_role("button", name="Refresh").click()
    expect(page.locator("#list-status")).to_contain_text("updated")
    return sorted(page.evaluate(LIST_STATE))


def _store(server: LiveServer) -> list[list[object]]:
    return sorted([r.id, r.name, r.enabled] for r in server.runners())


def _download(page: Page) -> dict[str, object]:
    with page.expect_download() as info:
        page.get_by_role("button", name="Download runner.json").click()
    return json.loads(Path(info.value.path()).read_text())


def test_two_admins_register_and_disable_concurrently(
    server: LiveServer, new_tab: Callable[..., Tab], artifacts: Path
) -> None:
    a, b = new_tab(), new_tab(390, 844)
    login(a.page, server.url)
    login(b.page, server.url, SECOND_ADMIN, SECOND_PW)

    # 1. different sources, submitted back to back (the requests overlap): both land
    fill_registration(a.page, "from-a", source="node-b")
    fill_registration(b.page, "from-b", source="node-c")
    a.page.get_by_role("button", name="Register node").click()
    b.page.get_by_role("button", name="Register node").click()
    cfg_a, cfg_b = _download(a.page), _download(b.page)
    assert cfg_a["runnerId"] != cfg_b["runnerId"] and cfg_a["token"] != cfg_b["token"]

    # 2. the same source (local belongs to the system, whoever the admin): exactly one wins
    fill_registration(a.page, "local-a", source="local")
    fill_registration(b.page, "local-b", source="local")
    a.page.get_by_role("button", name="Register node").click()
    b.page.get_by_role("button", name="Register node").click()
    outcomes = []
    for tab in (a, b):
        done = tab.page.locator("#download-config:visible, #banner:visible").first
        expect(done).to_be_visible()
        outcomes.append("won" if tab.page.locator("#download-config").is_visible() else "lost")
    assert sorted(outcomes) == ["lost", "won"]
    loser = a if outcomes[0] == "lost" else b
    expect(loser.page.get_by_role("alert")).to_contain_text("runner_source_in_use")
    winner = b if loser is a else a
    _download(winner.page)

    # both lists agree with each other and with the store
    assert _listed(a.page) == _listed(b.page) == _store(server)
    assert len(_store(server)) == 3

    # 3. concurrent disables of different nodes: both take effect
    runner_item(a.page, "from-b").get_by_role("button", name="Disable from-b").click()
    runner_item(b.page, "from-a").get_by_role("button", name="Disable from-a").click()
    a.page.get_by_role("dialog").get_by_role("button", name="Disable node").click()
    b.page.get_by_role("dialog").get_by_role("button", name="Disable node").click()
    for tab, name in ((a, "from-b"), (b, "from-a")):
        expect(tab.page.locator("#banner")).to_contain_text(f"“{name}” was disabled")

    # 4. a stale list: B still shows the winner enabled after A disabled it; B's disable is harmless
    win_name = "local-a" if winner is a else "local-b"
    runner_item(a.page, win_name).get_by_role("button", name=f"Disable {win_name}").click()
    runner_item(b.page, win_name).get_by_role("button", name=f"Disable {win_name}").click()
    a.page.get_by_role("dialog").get_by_role("button", name="Disable node").click()
    b.page.get_by_role("dialog").get_by_role("button", name="Disable node").click()
    for tab in (a, b):
        expect(runner_item(tab.page, win_name).locator(".runner-head")).to_contain_text("Disabled")

    final_a, final_b, stored = _listed(a.page), _listed(b.page), _store(server)
    assert final_a == final_b == stored
    assert [enabled for _, _, enabled in stored] == [False, False, False]
    # the source is free again for either admin
    fill_registration(b.page, "after", source="local")
    b.page.get_by_role("button", name="Register node").click()
    _download(b.page)
    assert _listed(a.page) == _listed(b.page) == _store(server)
    shot(a.page, artifacts, "two-admins-a-1280")
    shot(b.page, artifacts, "two-admins-b-390")
    assert a.errors == [] and b.errors == []
