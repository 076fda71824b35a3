"""The walkthrough (``python -m conformance demo``) passes against the reference runner, fails
the runners it must fail, and leaves nothing holding a token behind."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from conformance.adapter import RunnerStartError, TemplateError
from conformance.demo import main, run_demo
from conformance.reference_cmd import REFERENCE_RUNNER_CMD


@pytest.mark.slow  # end to end: the whole walkthrough, a server restart and reconnect included
async def test_demo_passes_on_reference_runner(tmp_path: Path) -> None:
    report = await run_demo(REFERENCE_RUNNER_CMD, tmp_path, quiet=True)
    failed = [(s.name, s.detail) for s in report.steps if s.status != "pass"]
    assert failed == []
    assert report.exit_code == 0
    assert report.secrets_leaked == []
    assert json.loads((tmp_path / "report.json").read_text())["ok"] is True
    transcript = json.loads((tmp_path / "transcript.json").read_text())
    delivered = [c for ex in transcript if ex["type"] == "exchange" and ex["route"] == "poll"
                 for c in (ex["response_body"] or {}).get("commands", [])]
    downloads = [c for c in delivered if c["payload"].get("path") == "/api/files/download"]
    assert len(downloads) >= 2  # the download inside the roots and the '..' escape
    assert all("profile=default" in c["payload"]["search"] for c in downloads)


async def test_demo_fails_fast_on_a_runner_that_never_connects(tmp_path: Path) -> None:
    """It exits at once: the connects step fails with its exit code instead of waiting out the
    20 s online timeout (pytest-timeout would not catch the difference; the step text does)."""
    report = await run_demo(f"{sys.executable} -c pass {{config}}", tmp_path, quiet=True)
    assert not report.ok
    first = report.steps[0]
    assert first.name == "connects" and first.status == "fail"
    assert "exited with code 0" in first.detail
    assert report.exit_code == 0


@pytest.mark.slow  # end to end: the whole walkthrough against a leaking runner
async def test_demo_fails_a_runner_that_prints_its_config(tmp_path: Path) -> None:
    """The secret scan can fail: a runner that echoes runner.json leaks its token; the token is
    not in anything the demo wrote, and the directory that held runner.json is gone."""
    seen = tmp_path / "config-path.txt"
    cmd = (f"sh -c 'echo \"$0\" > {seen}; cat \"$0\" >&2; "
           f"exec {sys.executable} -m runner_ref --config \"$0\"' {{config}}")
    out = tmp_path / "out"
    report = await run_demo(cmd, out, quiet=True)
    assert report.secrets_leaked and not report.ok
    assert any(leak.startswith("runner token in runner stderr") for leak in report.secrets_leaked)
    assert all(s.status == "pass" for s in report.steps)  # only the leak is wrong
    config_path = Path(seen.read_text().strip())
    assert config_path.name == "runner.json" and not config_path.parent.exists()
    stderr = (out / "runner.stderr").read_text()
    assert '"token": "«redacted»"' in stderr


def test_cli_bad_invocations_are_one_line(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    bad_out = tmp_path / "never-made"
    assert main(["--runner-cmd", "python -m runner_ref", "--out", str(bad_out)]) == 2
    assert not bad_out.exists()  # refused before anything was made
    assert main(["--runner-cmd", "/nonexistent/runner {config}", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and "{config}" in err[0] and "does not start" in err[1]
    assert issubclass(TemplateError, Exception) and issubclass(RunnerStartError, Exception)
