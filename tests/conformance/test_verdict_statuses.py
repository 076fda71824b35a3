"""Harness statuses apart from the runner's: the classification table, the verdicts and their
exit codes, the JUnit mapping, the folded causes and the timeout multiplier (issue 21 item 2)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import pytest_timeout

from conformance import bounds, causes, certify, judge, junit
from conformance.adapter import RunnerExited
from conformance.machines.rig import within
from conformance.machines.run import MachineFailed
from conformance.process import LineTimeout, MissingProgram
from conformance.results import (
    BY_STATUS,
    PRECEDENCE,
    STATUSES,
    CaseResult,
    RunResults,
    verdict_line,
)
from conformance.verdict import CaseFailed, Unjudged

from .engine_sample import HARNESS_CASES, engine_args, make_project

pytest_plugins = ["pytester"]


def _wrapped(cause: BaseException) -> MachineFailed:
    try:
        raise MachineFailed("receipts: …", None, {}) from cause
    except MachineFailed as exc:
        return exc


@pytest.mark.parametrize(("exc", "status"), [
    (CaseFailed("a", "b"), "fail"),
    (AssertionError("plain assert"), "fail"),
    (RunnerExited("the runner exited with code 1 before it came online", 1, []), "fail"),
    (TimeoutError("waited 10s for a result"), "timeout"),
    (LineTimeout("no line matching 'x' within 3s"), "timeout"),
    (MissingProgram("faketime is not installed"), "error"),
    (OSError(98, "Address already in use"), "error"),
    (KeyError("a bug of the harness"), "error"),
    (Unjudged("timeout", "2 cells not judged"), "timeout"),
    (_wrapped(TimeoutError("waited 10s")), "timeout"),
    (_wrapped(AssertionError("invariant 3 is violated")), "fail"),
    (ExceptionGroup("two", [OSError("x"), CaseFailed("a", "b")]), "fail"),
    (ExceptionGroup("two", [OSError("x"), TimeoutError("y")]), "error"),
])
def test_classification_table(exc: BaseException, status: str) -> None:
    assert judge.classify(exc) == status


def test_pytest_timeout_is_a_timeout_and_pytest_fail_a_fail() -> None:
    """Both forms of pytest-timeout's message (before 2.4 and since), and the one the installed
    pytest-timeout writes, are a timeout: an overrun bound is never the runner's failure."""
    installed = pytest_timeout.PYTEST_FAILURE_MESSAGE % 180.0
    for msg, status in (("Timeout >180.0s", "timeout"),
                        ("Timeout (>180.0s) from pytest-timeout.", "timeout"),
                        (installed, "timeout"), ("the runner said no", "fail"),
                        ("Timeouts are not a runner's fault", "fail")):
        try:
            pytest.fail(msg)
        except pytest.fail.Exception as exc:
            assert judge.classify(exc) == status


def test_every_status_has_a_junit_element_choice_and_a_precedence() -> None:
    assert set(PRECEDENCE) == set(STATUSES)
    assert {s: BY_STATUS[s].junit for s in ("fail", "error", "timeout", "not-run")} == {
        "fail": "failure", "error": "error", "timeout": "error", "not-run": "skipped"}


def _run(*statuses: tuple[str, str, str]) -> RunResults:
    cases = [CaseResult(id=i, level=lvl, family="f", feature="core", section="1",
                        requirement="r", status=s) for i, lvl, s in statuses]
    return RunResults("cmd {config}", "core", "0", "now", 1, cases=cases)


@pytest.mark.parametrize(("cases", "verdict", "code"), [
    ([("GEN-001", "MUST", "pass")], "pass", 0),
    ([("GEN-001", "MUST", "pass"), ("GEN-002", "SHOULD", "fail")], "pass", 0),
    ([("GEN-001", "MUST", "expected-fail"), ("GEN-002", "MUST", "pass")], "baselined", 0),
    ([("GEN-001", "MUST", "error"), ("GEN-002", "MUST", "timeout")], "incomplete", 3),
    ([("GEN-001", "MUST", "not-run")], "incomplete", 3),
    ([("GEN-001", "MUST", "error"), ("GEN-002", "MUST", "fail")], "fail", 1),
    ([("GEN-001", "MUST", "stale")], "fail", 1),
])
def test_verdicts_and_exit_codes(cases: list[tuple[str, str, str]], verdict: str, code: int) -> None:
    res = _run(*cases)
    assert res.verdict() == verdict
    assert certify.exit_code([res]) == code


def test_several_runners_exit_with_the_worst() -> None:
    ok, incomplete, bad = (_run(("GEN-001", "MUST", s)) for s in ("pass", "error", "fail"))
    assert certify.exit_code([ok, incomplete]) == 3
    assert certify.exit_code([incomplete, bad, ok]) == 1


def test_a_baselined_must_never_reads_pass() -> None:
    from conformance.report.certificate import certificate, certificate_md

    res = _run(("DED-001", "MUST", "expected-fail"), ("GEN-002", "MUST", "expected-fail"),
               ("GEN-003", "MUST", "pass"))
    assert verdict_line(res) == "CONFORMS EXCEPT 2 BASELINED MUST CASES (DED-001, GEN-002)"
    cert = certificate(res, {"command": "x", "version": None, "files": {}}, "today")
    md = certificate_md(cert)
    assert cert["verdict"] == "baselined" and "PASS" not in md
    assert "**Verdict: CONFORMS EXCEPT 2 BASELINED MUST CASES (DED-001, GEN-002)**" in md


def test_incomplete_certificate_names_the_cases_not_judged() -> None:
    from conformance.report.certificate import certificate, certificate_md

    res = _run(("INC-005", "MUST", "not-run"), ("GEN-001", "MUST", "timeout"))
    md = certificate_md(certificate(res, {"command": "x", "version": None, "files": {}}, "d"))
    assert "**Verdict: INCOMPLETE: 2 cases not judged**" in md
    assert "- INC-005: not-run" in md and "- GEN-001: timeout" in md


def test_causes_fold_across_ports_and_paths_and_lead_with_the_most_common() -> None:
    def dead(i: str) -> CaseResult:
        return CaseResult(id=i, level="MUST", family="f", feature="core", section="1",
                          requirement="r", status="fail",
                          detail="conformance.adapter.RunnerExited: the runner exited with code 1 "
                                 "before it came online; last output: cannot start\ntraceback")

    other = CaseResult(id="DED-001", level="MUST", family="f", feature="core", section="1",
                       requirement="r", status="timeout",
                       detail="TimeoutError: waited 10s for 127.0.0.1:4321 in /tmp/w1/x")
    lines = causes.cause_lines([dead(f"GEN-00{n}") for n in range(1, 4)] + [other])
    assert lines[0] == ("most common cause (3 cases fail): the runner exited with code 1 before "
                        "it came online; last output: cannot start")
    assert lines[1].startswith("  3 cases fail: the runner exited") and \
        lines[1].endswith("[GEN-001, GEN-002, GEN-003]")
    assert lines[2] == "  1 case timeout: waited 10s for 127.0.0.1:4321 in /tmp/w1/x [DED-001]"
    a, b = (CaseResult(id=i, level="MUST", family="f", feature="core", section="1",
                       requirement="r", status="error", detail=f"OSError: port {p} in /tmp/{i}/s")
            for i, p in (("GEN-001", 40001), ("GEN-002", 40002)))
    folded = causes.folds([a, b])
    assert [(f.cause, f.ids) for f in folded] == [("port <n> in <path>", ["GEN-001", "GEN-002"])]


def test_junit_elements_follow_the_statuses(tmp_path: Path) -> None:
    xml = tmp_path / "junit.xml"
    xml.write_text(
        '<?xml version="1.0"?><testsuites><testsuite name="s" errors="2" failures="0" skipped="0" '
        'tests="3">'
        '<testcase name="a"><properties><property name="status" value="fail"/></properties>'
        '<error message="failed on setup with RunnerExited">tb</error></testcase>'
        '<testcase name="b"><properties><property name="status" value="timeout"/></properties>'
        '<failure message="TimeoutError">tb</failure></testcase>'
        '<testcase name="c"><properties><property name="status" value="not-run"/></properties>'
        '<skipped message="not-run: faketime"/></testcase>'
        '<testcase name="plain"><error message="kept">x</error></testcase>'
        '</testsuite></testsuites>')
    junit.rewrite(xml)
    suite = ET.parse(xml).getroot().find("testsuite")
    assert suite is not None
    tags = {c.get("name"): [e.tag for e in c if e.tag != "properties"] for c in suite}
    assert tags == {"a": ["failure"], "b": ["error"], "c": ["skipped"], "plain": ["error"]}
    assert (suite.get("failures"), suite.get("errors"), suite.get("skipped")) == ("1", "2", "1")


def test_one_bound_scales_with_the_multiplier(monkeypatch: pytest.MonkeyPatch) -> None:
    import asyncio

    async def never() -> None:
        await asyncio.Event().wait()

    monkeypatch.setenv(bounds.ENV, "4")
    assert bounds.scaled(2.5) == 10.0
    with pytest.raises(TimeoutError, match=r"waited 0\.04s for nothing"):
        asyncio.run(within("nothing", never(), timeout=0.01))
    monkeypatch.setenv(bounds.ENV, "1")
    with pytest.raises(TimeoutError, match=r"waited 0\.01s for nothing"):
        asyncio.run(within("nothing", never(), timeout=0.01))
    with pytest.raises(bounds.MultiplierError):
        bounds.parse("0")


def test_harness_problems_are_error_and_timeout_and_the_run_incomplete(
        pytester: pytest.Pytester) -> None:
    make_project(pytester, HARNESS_CASES)
    (pytester.path / "b.txt").write_text("GEN-002\n")  # a baselined case that errs stays error
    r = pytester.runpytest(*engine_args("--conformance-out", "out", "--junitxml", "j.xml",
                                        "--conformance-baseline", "b.txt"))
    doc = json.loads((pytester.path / "out" / "results.json").read_text())
    got = {c["id"]: c["status"] for c in doc["cases"]}
    assert got == {"GEN-001": "timeout", "GEN-002": "error", "DED-002": "error", "TT-001": "pass"}
    assert doc["summary"]["verdict"] == "incomplete" and doc["summary"]["ok"] is False
    ded = next(c for c in doc["cases"] if c["id"] == "DED-002")
    assert "does not declare needs=('faketime',)" in ded["detail"]
    suite = ET.parse(pytester.path / "j.xml").getroot().find("testsuite")
    assert suite is not None and (suite.get("errors"), suite.get("failures")) == ("3", "0")
    assert "INCOMPLETE: 3 cases not judged" in r.stdout.str()


def test_skip_unavailable_reports_not_run(pytester: pytest.Pytester,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    make_project(pytester, '''
from conformance.marks import case

@case("GEN-001")
async def test_needs_faketime(world):
    assert False, "never runs"
''')
    pytester.makepyfile(needcat='''
from conformance.catalogue import Case, Catalogue
CAT = Catalogue([Case("GEN-001", "MUST", "X MUST y.", "2.4", "generations", needs=("faketime",))])
''')
    monkeypatch.setenv("CONFORMANCE_LIBRARY_ROOT", str(pytester.path / "empty-root"))
    pytester.runpytest(*engine_args("--conformance-out", "out", "--conformance-catalogue",
                                    "needcat:CAT", "--conformance-skip-unavailable"))
    doc = json.loads((pytester.path / "out" / "results.json").read_text())
    (case,) = doc["cases"]
    assert case["status"] == "not-run" and "Debian package 'faketime'" in case["detail"]
    assert doc["summary"]["verdict"] == "incomplete"
