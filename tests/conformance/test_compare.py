"""``python -m conformance compare``: the release diff names every changed case with both causes,
exits 1 on a new failure only, reads a version-1 bundle, and refuses bad input in one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conformance.compare import cause, diff, matrix_markdown
from conformance.compare import main as compare_main
from conformance.results import CaseResult, RunResults, dump


def rec(cid: str, status: str, *, actual: str = "", expected: str = "",
        detail: str = "") -> CaseResult:
    return CaseResult(id=cid, level="MUST", family="generations", feature="core", section="2.4",
                      requirement=f"requirement of {cid}", status=status, actual=actual,
                      expected=expected, detail=detail)


def run(*cases: CaseResult) -> RunResults:
    return RunResults(runner_cmd="r --config {config}", profile="core", harness_version="0",
                      started="2026-12-01T00:00:00+00:00", seed=1, cases=list(cases))


A = run(rec("GEN-001", "pass"), rec("GEN-002", "fail", actual="200 {}", expected="409 stale"),
        rec("GEN-003", "pass"), rec("GEN-005", "pass"), rec("GEN-006", "expected-fail",
                                                            detail="RunnerExited: code 1"))
B = run(rec("GEN-001", "fail", actual="two executions\nmore", expected="one execution"),
        rec("GEN-002", "pass"), rec("GEN-003", "pass"),
        rec("GEN-004", "error", detail="\nTimeoutError: no poll within 5s"),
        rec("GEN-006", "fail", detail="RunnerExited: code 1"))


def test_diff_names_every_change_and_the_new_failures() -> None:
    d = diff(A, B)
    assert [(c.id, c.statuses) for c in d.changes] == [
        ("GEN-001", ("pass", "fail")), ("GEN-002", ("fail", "pass")),
        ("GEN-004", ("absent", "error")), ("GEN-005", ("pass", "absent")),
        ("GEN-006", ("expected-fail", "fail"))]
    assert [c.id for c in d.new_failures] == ["GEN-001", "GEN-004", "GEN-006"]
    assert cause(B.cases[0]) == "two executions (expected one execution)"
    assert cause(B.cases[3]) == "TimeoutError: no poll within 5s"
    assert cause(None) == "absent" and cause(rec("X-001", "pass")) == ""
    md = matrix_markdown([("A", A), ("B", B)])
    assert "| GEN-001 | pass | fail |" in md and "| GEN-005 | pass | — |" in md


def test_cli_prints_both_causes_and_exits_1_on_a_new_failure(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    dump(A, a)
    dump(B, b)
    assert compare_main([str(a), str(b)]) == 1
    out = capsys.readouterr().out
    assert "NEW FAILURE  GEN-001 [MUST] pass -> fail" in out
    assert "A: (passed)" in out and "B: two executions (expected one execution)" in out
    assert "fixed        GEN-002 [MUST] fail -> pass" in out and "A: 200 {} (expected 409 stale)" in out
    assert "new failures: GEN-001, GEN-004, GEN-006 (exit 1)" in out
    assert "side by side" not in out  # two files: the diff, no matrix
    fixed = run(*(rec(c.id, "pass") if c.id == "GEN-002" else c for c in A.cases[:-1]))
    dump(fixed, b)
    assert compare_main([str(a), str(b)]) == 0  # a fix and a removed case only
    out = capsys.readouterr().out
    assert "fixed        GEN-002" in out and "only in A    GEN-006" in out
    assert "no new failure (exit 0)" in out
    assert compare_main([str(a), str(a)]) == 0


def test_a_version_1_bundle_of_an_older_release_is_read(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    old = A.to_dict()
    old["schema_version"] = 1
    for c in old["cases"]:
        c.pop("transcript_digest")
        c["transcript"] = ["{'type': 'exchange', 'seq': 1}"]
    (tmp_path / "old.json").write_text(json.dumps(old))
    dump(B, tmp_path / "new.json")
    assert compare_main([str(tmp_path / "old.json"), str(tmp_path / "new.json")]) == 1
    assert "GEN-001" in capsys.readouterr().out


@pytest.mark.parametrize(("content", "message"), [
    (None, "cannot read results"),
    (b"\xff\xfe", "not UTF-8"),
    (b"{not json", "not JSON (line 1"),
    (b"{}", "not a results.json of schema version 1 or 2"),
    (b'{"schema_version": 2, "cases": [1]}', "malformed results"),
    (b'{"schema_version": 2, "cases": [{"id": "GEN-001"}]}', "malformed results"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                          content: bytes | None, message: str) -> None:
    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    dump(A, good)
    if content is not None:
        bad.write_bytes(content)
    assert compare_main([str(good), str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("compare: error: ") and message in err and err.count("\n") == 1


def test_bad_arguments_are_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert compare_main([]) == 2
    err = capsys.readouterr().err
    assert err.startswith("compare: error: ") and err.count("\n") == 1
    assert compare_main(["a.json", "--bogus"]) == 2
    assert "unrecognized arguments: --bogus" in capsys.readouterr().err
