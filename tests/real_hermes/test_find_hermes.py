"""``find_hermes()``: where the real Hermes is looked up and the one-line skip reasons."""
from __future__ import annotations

from pathlib import Path

import pytest

from fixtures.real_hermes import config_for, find_hermes, install_plugin


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
