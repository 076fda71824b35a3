"""e2e 5: narrow and desktop layouts (no horizontal overflow, every control inside the viewport and
usable, screenshots kept), keyboard-only registration, a label on every form control."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from .e2e_support import ADMIN_PW, ADMIN_USER, LiveServer, Tab, login, register, runner_item, shot

pytestmark = pytest.mark.e2e

VIEWPORTS = [(390, 844), (375, 812), (1280, 720)]

# Every visible control: inside the viewport horizontally, of a usable size, and the element hit at
# its centre (after scrolling it into view) is the control itself — nothing covers it.
LAYOUT_PROBLEMS = """() => {
  const doc = document.documentElement;
  const problems = [];
  if (doc.scrollWidth > doc.clientWidth) problems.push(`page overflows: ${doc.scrollWidth} > ${doc.clientWidth}`);
  const controls = Array.from(document.querySelectorAll('input, select, textarea, button, a[href], [tabindex]:not([tabindex="-1"])'))
    .filter(el => el.getClientRects().length > 0 && getComputedStyle(el).visibility !== 'hidden');
  for (const el of controls) {
    el.scrollIntoView({block: 'center', inline: 'nearest'});
    const r = el.getBoundingClientRect();
    const name = `${el.tagName.toLowerCase()}#${el.id || ''} "${(el.textContent || el.value || '').trim().slice(0, 30)}"`;
    if (r.left < 0 || r.right > innerWidth + 0.5) problems.push(`${name} outside viewport: ${r.left}..${r.right} of ${innerWidth}`);
    if (r.width < 24 || r.height < 24) problems.push(`${name} too small: ${r.width}x${r.height}`);
    const hit = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);
    if (!(hit === el || el.contains(hit))) problems.push(`${name} covered by ${hit && hit.tagName}`);
  }
  window.scrollTo(0, 0);
  return problems;
}"""

UNLABELLED = """() => {
  const out = [];
  for (const el of document.querySelectorAll('input, select, textarea')) {
    const labelled = (el.labels && el.labels.length > 0 && Array.from(el.labels).some(l => l.textContent.trim()))
      || el.getAttribute('aria-label') || el.getAttribute('aria-labelledby');
    if (!labelled) out.push(`${el.tagName}#${el.id}`);
  }
  for (const el of document.querySelectorAll('button')) {
    if (!(el.textContent.trim() || el.getAttribute('aria-label'))) out.push(`button#${el.id}`);
  }
  return out;
}"""


def _check_layout(page: Page, what: str) -> None:
    problems = page.evaluate(LAYOUT_PROBLEMS)
    assert problems == [], f"{what}: {problems}"


@pytest.mark.parametrize(("width", "height"), VIEWPORTS, ids=[f"{w}x{h}" for w, h in VIEWPORTS])
def test_layout_fits_and_every_control_is_usable(
    server: LiveServer,
    new_tab: Callable[..., Tab],
    tmp_path: Path,
    artifacts: Path,
    width: int,
    height: int,
) -> None:
    tab = new_tab(width, height)
    page = tab.page
    size = f"{width}x{height}"
    page.goto(server.url + "/admin/")
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    _check_layout(page, "login")
    shot(page, artifacts, f"layout-{size}-login")

    login(page, server.url)
    reg = register(page, tmp_path / "n", "build-agent-with-a-rather-long-name-0123456789", profiles="default, research")
    page.get_by_label("Full path of runner.json on the node").fill(
        "/home/operator/very/long/path/that/might/overflow/a/narrow/screen/runner.json"
    )
    register(page, tmp_path / "m", "lab", source="node-b")
    page.get_by_role("button", name="Refresh").click()
    expect(runner_item(page, "lab")).to_be_visible()
    _check_layout(page, "list with the config card")
    shot(page, artifacts, f"layout-{size}-list")

    # an error banner, then the disable dialog, must fit too
    page.get_by_label("Node name").fill("again")
    page.get_by_role("button", name="Register node").click()
    expect(page.get_by_role("alert")).to_contain_text("runner_source_in_use")
    _check_layout(page, "error banner")
    runner_item(page, "lab").get_by_role("button", name="Disable lab").click()
    dialog = page.get_by_role("dialog")
    expect(dialog).to_be_visible()
    box = dialog.bounding_box()
    assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= width
    for name in ("Cancel", "Disable node"):
        button = dialog.get_by_role("button", name=name)
        expect(button).to_be_in_viewport()
    shot(page, artifacts, f"layout-{size}-dialog")
    dialog.get_by_role("button", name="Disable node").click()
    expect(runner_item(page, "lab").locator(".runner-head")).to_contain_text("Disabled")
    assert reg.config["allowedProfiles"] == ["default", "research"]
    assert tab.errors == []


def test_keyboard_only_registration(server: LiveServer, new_tab: Callable[..., Tab], tmp_path: Path) -> None:
    page = new_tab(390, 844).page
    kb = page.keyboard
    page.goto(server.url + "/admin/")
    expect(page.get_by_label("User name")).to_be_focused()
    kb.type(ADMIN_USER)
    kb.press("Tab")
    expect(page.get_by_label("Password")).to_be_focused()
    kb.type(ADMIN_PW)
    kb.press("Enter")
    expect(page.get_by_label("Node name")).to_be_focused()
    kb.type("keyboard-node")
    kb.press("Tab")
    expect(page.get_by_label("Source")).to_be_focused()
    kb.press("ArrowDown")  # local → the next source
    expect(page.get_by_label("Source")).to_have_value("node-b")
    kb.press("Tab")
    expect(page.get_by_label("Allowed profiles")).to_be_focused()
    kb.press("End")
    kb.type(", research")
    kb.press("Tab")
    expect(page.get_by_label("Yaoyao address reachable from the node")).to_be_focused()
    kb.press("Tab")
    expect(page.get_by_label("Hermes address on the node")).to_be_focused()
    kb.press("Tab")
    expect(page.get_by_role("button", name="Register node")).to_be_focused()
    kb.press("Enter")
    download_button = page.get_by_role("button", name="Download runner.json")
    expect(download_button).to_be_focused()
    with page.expect_download() as info:
        kb.press("Enter")
    config = json.loads(Path(info.value.path()).read_text())
    assert config["allowedProfiles"] == ["default", "research"]
    assert config["serverURL"] == server.url
    expect(page.get_by_label("Full path of runner.json on the node")).to_be_focused()

    # disable, keyboard only: Tab to the node's Disable button, confirm with the keyboard
    disable = runner_item(page, "keyboard-node").get_by_role("button", name="Disable keyboard-node")
    for _ in range(40):
        if page.evaluate("() => document.activeElement && document.activeElement.textContent") == "Disable":
            break
        kb.press("Tab")
    expect(disable).to_be_focused()
    kb.press("Enter")
    dialog = page.get_by_role("dialog")
    expect(dialog.get_by_role("button", name="Cancel")).to_be_focused()
    kb.press("Escape")  # Escape cancels
    expect(dialog).to_be_hidden()
    expect(disable).to_be_visible()
    disable.focus()
    kb.press("Enter")
    kb.press("Tab")
    expect(dialog.get_by_role("button", name="Disable node")).to_be_focused()
    kb.press("Enter")
    expect(runner_item(page, "keyboard-node").locator(".runner-head")).to_contain_text("Disabled")
    assert [(r.name, r.enabled) for r in server.runners()] == [("keyboard-node", False)]


def test_every_form_control_has_a_label(server: LiveServer, tab: Tab, tmp_path: Path) -> None:
    page = tab.page
    page.goto(server.url + "/admin/")
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    assert page.evaluate(UNLABELLED) == []
    login(page, server.url)
    register(page, tmp_path / "n", "labelled")
    runner_item(page, "labelled").get_by_role("button", name="Disable labelled").click()
    expect(page.get_by_role("dialog")).to_be_visible()
    assert page.evaluate(UNLABELLED) == []
    # and each one is reachable by its label
    for label in (
        "Node name", "Source", "Allowed profiles", "Yaoyao address reachable from the node",
        "Hermes address on the node", "Full path of runner.json on the node",
    ):
        expect(page.get_by_label(label, exact=True)).to_have_count(1)
