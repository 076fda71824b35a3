"""The main job (``python -m conformance demo``) passes against the reference runner."""

from __future__ import annotations

import sys
from pathlib import Path

from conformance.demo import run_demo


async def test_demo_passes_on_reference_runner(tmp_path: Path) -> None:
    report = await run_demo(f"{sys.executable} -m runner_ref --config {{config}}", tmp_path,
                            quiet=True)
    failed = [(s.name, s.detail) for s in report.steps if s.status != "pass"]
    assert failed == []
    assert report.exit_code == 0
    assert report.secrets_leaked == []
    text = (tmp_path / "report.json").read_text()
    assert '"ok": true' in text


async def test_demo_fails_a_runner_that_never_connects(tmp_path: Path) -> None:
    report = await run_demo(f"{sys.executable} -c pass {{config}}", tmp_path, quiet=True)
    assert not report.ok
    assert report.steps[0].name == "connects" and report.steps[0].status == "fail"


async def test_demo_fails_a_runner_that_prints_its_config(tmp_path: Path) -> None:
    """The secret scan can fail: a runner that echoes runner.json leaks its token."""
    cmd = f"sh -c 'cat \"$0\" >&2; exec {sys.executable} -m runner_ref --config \"$0\"' {{config}}"
    report = await run_demo(cmd, tmp_path, quiet=True)
    assert report.secrets_leaked and not report.ok
    assert all(s.status == "pass" for s in report.steps)  # only the leak is wrong
