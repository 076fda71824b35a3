"""e2e 1 and 3: register → download → the runner works; disable → the runner is refused and exits 1."""

from __future__ import annotations

import base64
import hashlib
import re
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from playwright.sync_api import expect

from .e2e_support import (
    LiveServer,
    RunnerProcess,
    Tab,
    login,
    refresh_until,
    register,
    runner_item,
    shot,
)

pytestmark = pytest.mark.e2e

CONFIG_KEYS = ["protocol", "serverURL", "runnerId", "token", "hermesURL", "allowedProfiles", "artifactRoots"]
UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
RUNNER_EXIT_TIMEOUT = 20.0


def _online_in_page(tab: Tab, name: str) -> bool:
    return "Online" in runner_item(tab.page, name).locator(".runner-head").inner_text()


def test_registered_config_is_right_and_its_token_brings_the_runner_online(
    server: LiveServer,
    tab: Tab,
    tmp_path: Path,
    start_runner: Callable[[Path], RunnerProcess],
    artifacts: Path,
) -> None:
    page = tab.page
    login(page, server.url)
    reg = register(page, tmp_path / "node-one", "node-one", profiles="default, research")

    cfg = reg.config
    assert list(cfg) == CONFIG_KEYS
    assert cfg["protocol"] == 1
    assert cfg["serverURL"] == server.url
    assert UUID.match(cfg["runnerId"])
    assert cfg["hermesURL"] == "http://127.0.0.1:9119"
    assert cfg["allowedProfiles"] == ["default", "research"]
    assert cfg["artifactRoots"] == []
    token = cfg["token"]
    assert len(token) == 43 and len(base64.urlsafe_b64decode(token + "=")) == 32
    record = server.run(server.cp.store.get_runner(cfg["runnerId"]))
    assert record is not None and record.token_hash == hashlib.sha256(token.encode()).hexdigest()

    # the reminder and the start command follow the path the admin types
    page.get_by_label("Full path of runner.json on the node").fill(str(reg.path))
    expect(page.locator("#chmod-cmd")).to_have_text(f"chmod 600 {reg.path}")
    expect(page.locator("#start-cmd")).to_have_text(f"python -m runner_ref --config {reg.path}")

    proc = start_runner(reg.path)
    # Online comes from the hub and features from the store, written in the same poll but not
    # in one step: wait for both to show rather than catch the instant between them.
    refresh_until(
        page,
        lambda: (_online_in_page(tab, "node-one")
                 and "credential-ref-v1" in runner_item(page, "node-one").inner_text())
        or proc.proc.poll() is not None,
        timeout=30,
        what="the runner to show Online with its features",
    )
    assert proc.proc.poll() is None, proc.output()[-2000:]
    item = runner_item(page, "node-one")
    expect(item.locator(".runner-head")).to_contain_text("Enabled")
    expect(item).to_contain_text("credential-ref-v1")  # features come from the runner's polls
    shot(page, artifacts, "register-runner-online-1280")
    assert token not in proc.output()
    assert tab.errors == []


def test_disable_refuses_the_live_runner_and_the_old_config_stays_dead(
    server: LiveServer,
    tab: Tab,
    tmp_path: Path,
    start_runner: Callable[[Path], RunnerProcess],
    artifacts: Path,
) -> None:
    page = tab.page
    login(page, server.url)
    first = register(page, tmp_path / "first", "node-a")
    runner_id = first.config["runnerId"]
    proc = start_runner(first.path)
    online = proc.wait_online(server, runner_id, timeout=30)
    assert online and proc.proc.poll() is None, proc.output()[-2000:]

    # cancel first: nothing changes
    item = runner_item(page, "node-a")
    item.get_by_role("button", name="Disable node-a").click()
    dialog = page.get_by_role("dialog")
    expect(dialog).to_contain_text("Disable “node-a”?")
    shot(page, artifacts, "disable-confirmation-1280")
    dialog.get_by_role("button", name="Cancel").click()
    expect(dialog).to_be_hidden()
    assert server.is_online(runner_id)

    item.get_by_role("button", name="Disable node-a").click()
    page.get_by_role("dialog").get_by_role("button", name="Disable node").click()
    expect(page.locator("#banner")).to_contain_text("“node-a” was disabled")
    expect(runner_item(page, "node-a").locator(".runner-head")).to_contain_text("Disabled")
    expect(runner_item(page, "node-a").get_by_role("button", name="Disable node-a")).to_have_count(0)

    assert proc.wait(RUNNER_EXIT_TIMEOUT) == 1, proc.output()[-2000:]
    refused = server.call(
        lambda: server.cp.history.filter(runner_id=runner_id, code="runner_unauthorized")
    )
    assert refused and all(ex.status == 403 for ex in refused)
    assert first.config["token"] not in proc.output()

    # a new registration on the same source gives a new id and a new token
    second = register(page, tmp_path / "second", "node-a2")
    assert second.config["runnerId"] != runner_id
    assert second.config["token"] != first.config["token"]

    # the old config stays dead, even from a fresh directory
    old_dir = tmp_path / "old-again"
    old_dir.mkdir()
    shutil.copy(first.path, old_dir / "runner.json")
    (old_dir / "runner.json").chmod(0o600)
    again = start_runner(old_dir / "runner.json")
    assert again.wait(RUNNER_EXIT_TIMEOUT) == 1, again.output()[-2000:]
    assert not server.is_online(runner_id)
    records = {r.name: r.enabled for r in server.runners()}
    assert records == {"node-a": False, "node-a2": True}
    assert tab.errors == []
