"""A run never passes by leaving cases out (conformance/unrun.py): certify pads what its session
did not record as not-run, an interrupted certify ends INCOMPLETE (exit 3) and leaves no runner
behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conformance.catalogue import CATALOGUE, case_patterns
from conformance.results import CaseResult, RunResults
from conformance.unrun import NOT_RUN, padded

ROOT = Path(__file__).resolve().parents[2]
SELECTED = "DED-*,REC-*,WIR-*"


def _run(*ids: str) -> RunResults:
    cases = [CaseResult(id=i, level="MUST", family="dedupe", feature="core", section="4",
                        requirement="r", status="pass") for i in ids]
    return RunResults(runner_cmd="r", profile="core", harness_version="v", started="t", seed=1,
                      cases=cases)


def test_missing_selected_cases_are_padded_not_run() -> None:
    whole, added = padded(_run("DED-002"), ["DED-001", "DED-002", "DED-003"], CATALOGUE, "why")
    assert added == 2
    assert [(c.id, c.status) for c in whole.cases] == [
        ("DED-001", NOT_RUN), ("DED-002", "pass"), ("DED-003", NOT_RUN)]
    assert whole.cases[0].level == CATALOGUE.get("DED-001").level  # type: ignore[union-attr]
    assert whole.verdict() == "incomplete"


def test_a_complete_run_is_left_as_it_is() -> None:
    run = _run("DED-001")
    assert padded(run, ["DED-001"], CATALOGUE, "why") == (run, 0)


def _runners_under(pid: int) -> set[int]:
    """The pids of the runners ``pid`` started for its cases (``--config``: never the
    ``--version`` probe certify makes once the session is over)."""
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes().split(b"\0")
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if b"runner_ref" in cmd and b"--config" in cmd and ppid == pid:
            found.add(int(entry.name))
    return found


def _ctrl_c_heard() -> None:
    """certify as a terminal starts it: SIGINT not ignored. A shell's background job (``cmd &``
    without job control) ignores SIGINT, its children inherit that, and Python then keeps it
    ignored (the test ran under such a job once and its certify ran to the end)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_an_interrupted_certify_is_incomplete_and_leaves_no_runner(tmp_path: Path,
                                                                   sig: int) -> None:
    """SIGINT (Ctrl-C) or SIGTERM (a cancelled CI job) while a case runs: exit 3, the unrun cases not-run in results.json, no
    PASS on what was judged, and the process ends (its runner killed)."""
    out = tmp_path / "out"
    # enough cases that the signal lands mid-session however late the first runner is seen (a
    # loaded CI machine once saw none before the 9 DED cases were over)
    proc = subprocess.Popen(
        [sys.executable, "-m", "conformance", "certify", "--cases", SELECTED, "-j", "1",
         "--no-progress", "--out", str(out)], cwd=ROOT, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True, start_new_session=True, preexec_fn=_ctrl_c_heard)
    try:
        deadline = time.monotonic() + 60
        while not (runners := _runners_under(proc.pid)):  # a case is running: interrupt it
            assert proc.poll() is None and time.monotonic() < deadline, "no runner started"
            time.sleep(0.05)
        os.kill(proc.pid, sig)
        rest = proc.communicate(timeout=60)[0]
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 3, rest
    doc = json.loads((out / "results.json").read_text())
    statuses = {c["id"]: c["status"] for c in doc["cases"]}
    want = len(CATALOGUE.selection("core", case_patterns(SELECTED)))
    assert len(statuses) == want and NOT_RUN in statuses.values(), statuses
    assert "INCOMPLETE" in rest and "PASS " not in rest
    assert not any(Path(f"/proc/{pid}").exists() for pid in runners)
