"""Every composite starts as its own process (``python -m positive_controls NAME --config …``)
and keeps the reference runner's contract; one control is shown to change what a black-box
observer sees over real sockets, next to the reference runner."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conformance.reference_cmd import REFERENCE_RUNNER_CMD
from conformance.worlds import open_world
from positive_controls.verify import ROOT, runner_cmd

ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(
    p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)}


@pytest.mark.parametrize("name", ["contrary", "slow"])
def test_composite_launches_and_refuses_a_missing_config(tmp_path: Path, name: str) -> None:
    missing = str(tmp_path / "absent" / "runner.json")
    proc = subprocess.run([sys.executable, "-m", "positive_controls", name, "--seed", "7",
                           "--config", missing], env=ENV, cwd=tmp_path, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 1, proc.stderr
    assert "cannot read the node JSON config" in proc.stderr
    assert "Traceback" not in proc.stderr and not proc.stdout
    assert ("jitter seed 7" in proc.stderr) is (name == "slow")


@pytest.mark.parametrize("argv, code", [([], 2), (["no-such-control"], 2), (["--list"], 0),
                                        (["slow", "--seed", "x"], 2)])
def test_cli_usage(argv: list[str], code: int) -> None:
    proc = subprocess.run([sys.executable, "-m", "positive_controls", *argv], env=ENV,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == code, proc.stderr
    assert "Traceback" not in proc.stderr


async def _extension_code(cmd: str) -> str | None:
    async with open_world(cmd) as world:
        handle = await world.cp.submit(world.runner_id, "browser.invoke", {})
        out = await handle.wait(30.0)
        return out.code  # type: ignore[no-any-return]


async def test_an_open_choice_is_visible_to_the_control_plane() -> None:
    """Over real sockets: an extension kind is 409 for the reference runner and 400
    runner_command_unknown for the control (both allowed, docs/protocol.md §3)."""
    assert await _extension_code(REFERENCE_RUNNER_CMD) \
        == "runner_feature_unavailable"
    assert await _extension_code(runner_cmd("extension-kind-unknown", 1)) \
        == "runner_command_unknown"
