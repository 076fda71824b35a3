"""The launcher without a real Hermes: ``find_hermes()`` and its one-line reasons, the config and
plugin it writes, and ``RealHermes`` against stand-in executables (ready line, minimal env,
fail-fast exit, bounded wait, group reaped)."""
from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from conformance.process import live_group_members
from fixtures.real_hermes import (
    HermesStartError,
    RealHermes,
    config_for,
    find_hermes,
    install_plugin,
)


def fake_venv(root: Path, version: str) -> Path:
    exe = root / "bin" / "hermes"
    exe.parent.mkdir(parents=True)
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    (root / "lib" / "python3.11" / "site-packages" / f"hermes_agent-{version}.dist-info").mkdir(
        parents=True)
    return exe


def test_explicit_binary_wins_and_missing_one_is_a_reason(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    exe = fake_venv(tmp_path / "v", "0.19.0")
    monkeypatch.setenv("HERMES_AGENT_BIN", str(exe))
    assert find_hermes() == (exe, "")
    monkeypatch.setenv("HERMES_AGENT_BIN", str(tmp_path / "nothing" / "hermes"))
    path, reason = find_hermes()
    assert path is None and reason.startswith("hermes-agent not found at HERMES_AGENT_BIN")
    assert "\n" not in reason


def test_wrong_version_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HERMES_AGENT_BIN", raising=False)
    fake_venv(tmp_path / "v", "0.18.2")
    monkeypatch.setenv("HERMES_AGENT_VENV", str(tmp_path / "v"))
    assert find_hermes() == (None, "hermes-agent 0.18.2 found, 0.19.0 needed")


def test_config_enables_our_plugin_and_the_plugin_is_copied(tmp_path: Path) -> None:
    cfg = config_for("http://127.0.0.1:1/v1")
    assert cfg["plugins"]["enabled"] == ["yaoyao-bot-bridge"]
    assert cfg["model"]["context_length"] >= 65536 and cfg["security"]["tirith_enabled"] is False
    assert "plugins" not in config_for("http://127.0.0.1:1/v1", plugin=False)
    target = install_plugin(tmp_path)
    names = sorted(p.relative_to(target).as_posix() for p in target.rglob("*") if p.is_file())
    assert names == ["__init__.py", "_shared.py", "bridge.py", "dashboard/manifest.json",
                     "dashboard/plugin_api.py", "plugin.yaml"]


def fake_hermes(tmp_path: Path, body: str) -> Path:
    """A stand-in ``hermes`` executable (a shell script) to drive the launcher's edges."""
    exe = tmp_path / "fake" / "hermes"
    exe.parent.mkdir(parents=True, exist_ok=True)
    exe.write_text("#!/bin/sh\n" + body)
    exe.chmod(0o755)
    return exe


READY = """\
[ "$1 $2" = "dashboard --no-open" ] || exit 9
{ env | grep -c '^HERMES_DASHBOARD_SESSION_TOKEN=' ; env | grep -c 'OPENAI\\|RUNNER' ; } \
  > "$HERMES_HOME/env-check"
printf '{"port": 4242}' > "$HERMES_DESKTOP_READY_FILE"
echo "HERMES_DASHBOARD_READY port=4242"
sleep 60 &
wait
"""


async def test_ready_line_env_and_group_reaped(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-must-not-leak")
    exe = fake_hermes(tmp_path, READY)
    h = RealHermes("http://127.0.0.1:1/v1", hermes_bin=exe, start_timeout=30)
    async with h:
        assert h.url == "http://127.0.0.1:4242"
        assert (h.home / "env-check").read_text().split() == ["1", "0"]
        assert (h.home / "plugins" / "yaoyao-bot-bridge" / "plugin.yaml").is_file()
        assert '"yaoyao-bot-bridge"' in (h.home / "config.yaml").read_text()
        assert h.session_token in h.secrets and len(h.session_token) >= 40
        root, pid = h.root, h.pid
    assert pid is not None and not root.exists()
    assert await group_gone(pid)  # the whole group (the shell and its sleep) is gone


async def group_gone(pgid: int, bound: float = 5.0) -> bool:
    """Poll (bounded) until no live process of the group is left. A killed orphan stays a zombie
    until init reaps it, at init's own pace (here about a second later), so zombies count as
    gone: they are dead."""
    loop = asyncio.get_running_loop()
    end = loop.time() + bound
    while loop.time() < end:
        if not live_group_members(pgid):
            return True
        await asyncio.sleep(0.02)
    return False


async def test_a_hermes_that_exits_fails_fast(tmp_path: Path) -> None:
    exe = fake_hermes(tmp_path, "echo boom >&2\nexit 3\n")
    with pytest.raises(HermesStartError, match="exited 3") as err:
        async with RealHermes("http://127.0.0.1:1/v1", hermes_bin=exe, start_timeout=60):
            pass
    assert "boom" in str(err.value)


async def test_no_ready_line_is_bounded(tmp_path: Path) -> None:
    exe = fake_hermes(tmp_path, "sleep 60\n")
    with pytest.raises(HermesStartError, match="not ready within"):
        async with RealHermes("http://127.0.0.1:1/v1", hermes_bin=exe, start_timeout=0.5):
            pass


def test_missing_hermes_raises_with_the_reason(monkeypatch: pytest.MonkeyPatch,
                                               tmp_path: Path) -> None:
    monkeypatch.setenv("HERMES_AGENT_BIN", str(tmp_path / "none" / "hermes"))
    with pytest.raises(HermesStartError, match="not found at HERMES_AGENT_BIN"):
        RealHermes("http://127.0.0.1:1/v1")
