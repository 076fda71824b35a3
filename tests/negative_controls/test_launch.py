"""Every control starts as its own process (``python -m negative_controls NAME --config …``)
and keeps the reference runner's contract apart from its bug; two controls are shown to change
what a black-box observer sees over real sockets (the control plane's history, the runner's
output), next to the reference runner, without the conformance cases."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conformance.worlds import open_world
from negative_controls.registry import CONTROLS
from negative_controls.verify import ROOT, runner_cmd

ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(
    p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)}
BATCH = 8


def test_one_control_per_family_launches_and_refuses_a_missing_config(tmp_path: Path) -> None:
    """The launch path is the same for every control (patch, then runner_ref's main); every
    control's patch is applied in-process by test_seams.py, so one per family is started."""
    missing = str(tmp_path / "absent" / "runner.json")
    rows = list({c.family: c for c in reversed(CONTROLS)}.values())
    for i in range(0, len(rows), BATCH):
        procs = [(c.name, subprocess.Popen(
            [sys.executable, "-m", "negative_controls", c.name, "--config", missing],
            env=ENV, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
            for c in rows[i:i + BATCH]]
        for name, proc in procs:
            out, err = proc.communicate(timeout=60)
            assert proc.returncode == 1, (name, proc.returncode, err)
            assert "cannot read the node JSON config" in err, (name, err)
            assert "Traceback" not in err and not out, (name, out, err)


@pytest.mark.parametrize("argv, code", [([], 2), (["no-such-control"], 2), (["--list"], 0)])
def test_cli_usage(argv: list[str], code: int) -> None:
    proc = subprocess.run([sys.executable, "-m", "negative_controls", *argv], env=ENV,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == code, proc.stderr
    if argv == ["--list"]:
        assert len(proc.stdout.splitlines()) == len(CONTROLS)


async def _first_poll_reset(control: str | None) -> bool:
    async with open_world(runner_cmd(control)) as world:
        polls = [ex for ex in world.cp.history if ex.route == "poll"]
        return polls[0].reset


async def test_no_reset_header_is_visible_in_the_history() -> None:
    assert await _first_poll_reset(None) is True
    assert await _first_poll_reset("no-reset-header") is False


async def test_prints_token_leaks_and_the_reference_does_not() -> None:
    for control, leaks in ((None, False), ("prints-token", True)):
        async with open_world(runner_cmd(control)) as world:
            assert world.runner is not None
            await world.runner.stop()
            found = [leak for leak in world.scan_for_secrets() if "output" in str(leak)
                     or "stderr" in str(leak)]
            assert bool(found) is leaks, (control, found)
