"""``certify --retries``: a case the harness could not judge (timeout, error) runs again, never a
failure; the last attempt stands, the earlier ones stay in ``data.attempts`` (conformance/retry.py)."""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from conformance import certify, retry
from conformance.junit import replace_cases
from conformance.report import render_html
from conformance.results import CaseResult, RunResults

REPO = Path(__file__).resolve().parents[2]


def _case(cid: str, status: str, detail: str = "", **data: Any) -> CaseResult:
    return CaseResult(id=cid, level="MUST", family="f", feature="core", section="1",
                      requirement="r", status=status, detail=detail, duration=1.5, data=data)


def _run(*cases: CaseResult) -> RunResults:
    return RunResults(runner_cmd="cmd", profile="core", harness_version="0", started="t", seed=1,
                      duration=10.0, cases=list(cases))


def test_only_the_unjudged_are_run_again() -> None:
    run = _run(_case("A-1", "pass"), _case("A-2", "fail"), _case("A-3", "timeout"),
               _case("A-4", "error"), _case("A-5", "not-run"), _case("A-6", "expected-fail"))
    assert retry.unjudged(run) == ["A-3", "A-4"]


def test_the_last_attempt_stands_and_the_earlier_stay() -> None:
    first = _run(_case("A-1", "pass"), _case("A-3", "timeout", "TimeoutError: waited 10s"),
                 _case("A-4", "error", "boom"))
    again = _run(_case("A-3", "pass", world="fresh"), _case("A-4", "error", "boom again"))
    folded = retry.fold(first, again)
    by = {c.id: c for c in folded.cases}
    assert [c.id for c in folded.cases] == ["A-1", "A-3", "A-4"]
    assert by["A-1"] == first.cases[0]
    assert by["A-3"].status == "pass" and by["A-3"].data["world"] == "fresh"
    assert by["A-3"].data["attempts"] == [
        {"status": "timeout", "detail": "TimeoutError: waited 10s", "duration": 1.5}]
    assert by["A-4"].status == "error" and by["A-4"].detail == "boom again"
    assert folded.duration == 20.0
    # a second round keeps the first attempt first
    twice = retry.fold(folded, _run(_case("A-4", "pass")))
    assert [a["status"] for a in {c.id: c for c in twice.cases}["A-4"].data["attempts"]] == \
        ["error", "error"]
    line = retry.summary_line(twice) or ""
    assert "A-3 timeout → pass" in line and "A-4 error → error → pass" in line
    assert retry.summary_line(first) is None
    html = render_html(twice, identity={})
    assert "attempt 1 (error: boom), attempt 2 (error: boom again); attempt 3: pass" in html


def test_many_unjudged_are_not_run_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert retry.most(1) == 3 and retry.most(170) == 17
    sessions: list[str] = []

    def run_one(args: Any, cmd: str, out: Path) -> RunResults:
        sessions.append(f"{args.cases} -j {args.jobs} retries {args.retries}")
        return _run(*(_case(cid, "pass") for cid in args.cases.split(",")))

    monkeypatch.setattr(certify, "run_one", run_one)
    args = certify.parser().parse_args(["--out", str(tmp_path)])
    args.jobs = 4
    few = _run(*(_case(f"A-{i:02}", "pass") for i in range(28)), _case("B-1", "timeout"),
               _case("B-2", "error"))
    folded = certify.run_again(args, "cmd", tmp_path, few)
    assert sessions == ["B-1,B-2 -j 2 retries 0"]
    assert [c.status for c in folded.cases if c.id.startswith("B")] == ["pass", "pass"]
    many = _run(*(_case(f"A-{i:02}", "pass") for i in range(26)),
                *(_case(f"B-{i}", "timeout") for i in range(4)))
    assert certify.run_again(args, "cmd", tmp_path, many) is many   # 4 > 3 of 30: not run
    args.retries = 0
    assert certify.run_again(args, "cmd", tmp_path, few) is few
    assert len(sessions) == 1


ERROR = '<error message="x"/>'


def _junit(path: Path, cases: dict[str, str]) -> None:
    body = "".join(
        f'<testcase name="{cid}"><properties><property name="case_id" value="{cid}"/>'
        f'</properties>{ERROR if st == "error" else ""}</testcase>'
        for cid, st in cases.items())
    path.write_text(f'<testsuites><testsuite name="s" tests="{len(cases)}">{body}'
                    "</testsuite></testsuites>")


def test_the_retry_testcase_replaces_the_first_in_place(tmp_path: Path) -> None:
    main, later = tmp_path / "junit.xml", tmp_path / "again.xml"
    _junit(main, {"A-1": "pass", "A-3": "error", "A-9": "pass"})
    _junit(later, {"A-3": "pass"})
    replace_cases(main, later)
    suite = ET.parse(main).getroot().find("testsuite")
    assert suite is not None
    assert [c.get("name") for c in suite.iter("testcase")] == ["A-1", "A-3", "A-9"]
    assert suite.get("errors") == "0" and suite.get("tests") == "3"


HANG_ONCE = """\
import os, sys, time
marker = sys.argv.pop(1)
if "--version" not in sys.argv and not os.path.exists(marker):
    open(marker, "w").close()
    time.sleep(600)   # the first start never comes online: the harness's bound runs out
sys.argv = ["runner_ref"] + sys.argv[1:]
import runner_ref.__main__ as m
sys.exit(m.main())
"""


def _certify(tmp_path: Path, *extra: str) -> tuple[int, dict[str, Any], str]:
    script = tmp_path / "hang_once.py"
    script.write_text(HANG_ONCE)
    out = tmp_path / "bundle"
    marker = tmp_path / "started-once"
    proc = subprocess.run(
        [sys.executable, "-m", "conformance", "certify", "--cases", "LIM-001", "-j", "1",
         "--no-progress", "--timeout-multiplier", "0.3", "--out", str(out),
         "--runner-cmd", f"{sys.executable} {script} {marker} --config {{config}}", *extra],
        cwd=REPO, capture_output=True, text=True, timeout=300)
    case = json.loads((out / "results.json").read_text())["cases"][0]
    return proc.returncode, case, proc.stdout + proc.stderr


@pytest.mark.slow
def test_a_start_that_timed_out_once_is_judged_on_the_second_attempt(tmp_path: Path) -> None:
    code, case, output = _certify(tmp_path)
    assert code == 0 and case["status"] == "pass", output[-2000:]
    assert [a["status"] for a in case["data"]["attempts"]] == ["timeout"]
    assert "LIM-001 timeout → pass" in output


@pytest.mark.slow
def test_retries_0_keeps_the_first_attempt(tmp_path: Path) -> None:
    code, case, output = _certify(tmp_path, "--retries", "0")
    assert code == 3 and case["status"] == "timeout", output[-2000:]
    assert "attempts" not in case["data"]
