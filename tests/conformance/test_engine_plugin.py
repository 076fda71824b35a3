"""The pytest plugin, driven through ``pytester`` on a tiny in-test project (no runner)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest

from conformance import results as results_mod
from conformance.witness import item_line

from .engine_sample import SECRET, WITNESS, engine_args, make_project

#: the exchange GEN-002's witness line of the sample project quotes
SAMPLE_EXCHANGE = {
    "type": "exchange", "seq": 41, "route": "result", "method": "POST", "runner_id": "r1",
    "instance": None, "request_epoch": "e-1", "epoch": "e-2", "reset": False, "status": 200,
    "code": None, "request_body": {"id": "c-7", "result": {"status": 200}},
    "response_body": {"ok": True}, "command_id": "c-7"}

pytest_plugins = ["pytester"]


def run(pytester: pytest.Pytester, *extra: str) -> tuple[pytest.RunResult, dict]:
    r = pytester.runpytest(*engine_args("--conformance-out", "out", *extra))
    doc = json.loads((pytester.path / "out" / "results.json").read_text())
    return r, doc


def statuses(doc: dict) -> dict[str, str]:
    return {c["id"]: c["status"] for c in doc["cases"]}


def test_statuses_from_every_kind_of_case(pytester: pytest.Pytester) -> None:
    make_project(pytester)
    pytester.makefile(".txt", baseline="DED-002\nISO-001  # fixed upstream\n")
    _, doc = run(pytester, "--conformance-baseline", "baseline.txt")
    assert statuses(doc) == {
        "GEN-001": "pass", "GEN-002": "fail", "DED-001": "fail", "DED-002": "expected-fail",
        "TT-001": "pass", "ISO-001": "stale", "CFG-001": "fail",
        "LIM-001": "not-applicable",
    }
    results_mod.validate(doc)
    assert doc["summary"]["ok"] is False
    assert doc["summary"]["must"] == {"passed": 2, "total": 6}
    assert doc["summary"]["should"] == {"passed": 0, "total": 1}


def test_expected_actual_witness_and_requirement_are_recorded(pytester: pytest.Pytester) -> None:
    make_project(pytester)
    r, doc = run(pytester)
    gen2 = next(c for c in doc["cases"] if c["id"] == "GEN-002")
    assert gen2["expected"] == "409 runner_epoch_stale"
    assert gen2["actual"] == '200 {"ok": true}'
    assert gen2["witness"] == [WITNESS]
    assert WITNESS == item_line(SAMPLE_EXCHANGE, home_runner="r1")  # the sample's line is the one format
    assert gen2["requirement"] == "A stale-epoch result MUST be refused."
    assert gen2["level"] == "MUST" and gen2["family"] == "generations"
    assert f"--cases GEN-002 --seed {doc['seed']}" in gen2["replay"]
    # the terminal says it too: requirement, expected, actual and the witness lines
    out = r.stdout.str()
    assert "GEN-002 [MUST] A stale-epoch result MUST be refused." in out
    assert "expected: 409 runner_epoch_stale" in out
    assert WITNESS in out
    assert f"seed {doc['seed']}" in out


def test_not_applicable_when_the_runner_does_not_advertise_the_feature(
    pytester: pytest.Pytester,
) -> None:
    make_project(pytester)
    _, doc = run(pytester, "--conformance-cases", "LIM-*")
    (lim,) = doc["cases"]
    assert lim["status"] == "not-applicable"
    assert "artifact-chunks-v1" in lim["detail"]


def test_an_advertised_feature_makes_the_case_apply(pytester: pytest.Pytester) -> None:
    cases = '''
from conformance.marks import case

@case("LIM-001", advertise=["artifact-chunks-v1"])
async def test_applies(world):
    assert world.features == {"artifact-chunks-v1"}
'''
    make_project(pytester, cases)
    _, doc = run(pytester)
    assert statuses(doc) == {"LIM-001": "pass"}


def test_profile_deselects_cases_of_other_features(pytester: pytest.Pytester) -> None:
    make_project(pytester)
    r, doc = run(pytester, "--conformance-profile", "core")
    assert "TT-001" not in statuses(doc) and "LIM-001" not in statuses(doc)
    assert doc["profile"] == "core"
    r.assert_outcomes(passed=3, failed=3, errors=1, deselected=2)


def test_case_pattern_selects_by_id(pytester: pytest.Pytester) -> None:
    make_project(pytester)
    _, doc = run(pytester, "--conformance-cases", "DED-*,GEN-001")
    assert sorted(statuses(doc)) == ["DED-001", "DED-002", "GEN-001"]


def test_exitfirst_stops_at_the_first_failing_must(pytester: pytest.Pytester) -> None:
    cases = '''
from conformance.marks import case
from conformance.verdict import expect

@case("DED-001")
async def test_should_fails_first(world):
    expect(False, expected="a", actual="b")

@case("GEN-002")
async def test_must_fails(world):
    expect(False, expected="a", actual="b")

@case("GEN-001")
async def test_never_reached(world):
    pass
'''
    make_project(pytester, cases)
    _, doc = run(pytester, "--conformance-exitfirst")
    # a failing SHOULD does not stop the run; the failing MUST does
    assert statuses(doc) == {"DED-001": "fail", "GEN-002": "fail"}


def test_secret_leak_fails_the_case_and_no_secret_is_written(pytester: pytest.Pytester) -> None:
    cases = f'''
from conformance.marks import case
from conformance.verdict import expect

@case("CFG-001", leak=True)
async def test_leaks(world):
    pass

@case("GEN-002")
async def test_quotes_the_secret(world):
    print("debug token {SECRET}")
    expect(False, expected="no token", actual="token={SECRET}", witness=["#- runner stdout token={SECRET}"])
'''
    make_project(pytester, cases)
    r, doc = run(pytester, "--junitxml", "out/junit.xml", "-o", "junit_logging=all")
    assert statuses(doc) == {"CFG-001": "fail", "GEN-002": "fail"}
    cfg = next(c for c in doc["cases"] if c["id"] == "CFG-001")
    assert cfg["witness"] == ["#- harness leak: runner stdout line 3: token=«redacted»"]
    for name in ("results.json", "junit.xml"):
        assert SECRET not in (pytester.path / "out" / name).read_text(), name
    assert SECRET not in r.stdout.str()
    gen = next(c for c in doc["cases"] if c["id"] == "GEN-002")
    assert gen["actual"] == "token=«redacted»"


def test_junit_carries_case_properties(pytester: pytest.Pytester) -> None:
    make_project(pytester)
    pytester.makefile(".txt", baseline="DED-002\n")
    run(pytester, "--junitxml", "out/junit.xml", "--conformance-baseline", "baseline.txt")
    tree = ET.parse(pytester.path / "out" / "junit.xml")
    props = {}
    for tc in tree.iter("testcase"):
        p = {e.get("name"): e.get("value") for e in tc.iter("property")}
        props[p["case_id"]] = p
    assert props["GEN-002"] == {"case_id": "GEN-002", "level": "MUST", "family": "generations",
                                "feature": "core", "section": "2.4", "status": "fail"}
    assert props["DED-002"]["status"] == "expected-fail"
    assert props["DED-001"]["level"] == "SHOULD"


def test_transcript_is_attached_to_each_case(pytester: pytest.Pytester) -> None:
    make_project(pytester)
    _, doc = run(pytester, "--conformance-cases", "GEN-001", "--conformance-transcripts", "all")
    (gen,) = doc["cases"]
    assert gen["transcript"][0] == "-> GET /api/runner/poll"  # a foreign world's text items
    assert gen["transcript_digest"] is None


def test_a_passing_case_keeps_only_a_digest_by_default(pytester: pytest.Pytester) -> None:
    make_project(pytester)
    _, doc = run(pytester, "--conformance-cases", "GEN-001,GEN-002")
    by_id = {c["id"]: c for c in doc["cases"]}
    passing, failing = by_id["GEN-001"], by_id["GEN-002"]
    assert passing["status"] == "pass" and passing["transcript"] == []
    assert passing["transcript_digest"]["items"] == 2
    assert len(passing["transcript_digest"]["sha256"]) == 64
    assert failing["status"] == "fail" and len(failing["transcript"]) == 2
    assert failing["transcript_digest"] is None
    _, none = run(pytester, "--conformance-cases", "GEN-002", "--conformance-transcripts", "none")
    assert none["cases"][0]["transcript"] == [] and none["cases"][0]["transcript_digest"]


def test_ordinary_tests_are_left_alone(pytester: pytest.Pytester) -> None:
    cases = '''
from conformance.marks import case

def test_plain():
    assert True

@case("GEN-001")
async def test_case(world):
    pass
'''
    make_project(pytester, cases)
    r, doc = run(pytester)
    r.assert_outcomes(passed=2)
    assert statuses(doc) == {"GEN-001": "pass"}


def test_a_case_without_a_catalogue_row_fails(pytester: pytest.Pytester) -> None:
    cases = '''
from conformance.marks import case

@case("GEN-999")
def test_orphan():
    pass
'''
    make_project(pytester, cases)
    r, doc = run(pytester)
    assert statuses(doc) == {"GEN-999": "fail"}
    assert "GEN-999 is not in the catalogue" in r.stdout.str()


def test_parametrized_case_is_one_record_worst_status(pytester: pytest.Pytester) -> None:
    cases = '''
import pytest
from conformance.marks import case

@case("GEN-001")
@pytest.mark.parametrize("n", [1, 2, 3])
def test_bad_inputs(n):
    assert n != 2
'''
    make_project(pytester, cases)
    _, doc = run(pytester)
    (gen,) = doc["cases"]
    assert gen["status"] == "fail"
    assert gen["nodeid"].count("test_bad_inputs") == 3


def test_world_gets_the_runner_cmd_hermes_and_case_options(pytester: pytest.Pytester) -> None:
    hermes = pytester.path / "hermes"  # an executable is all --hermes real:PATH checks here
    hermes.write_text("#!/bin/sh\nexit 0\n")
    hermes.chmod(0o755)
    cases = f'''
from conformance.marks import any_hermes, case

@any_hermes
@case("GEN-001", script="two-prompts", kill_at="admit")
async def test_options(world, runner_cmd, hermes_mode, case_seed):
    assert world.options == {{"script": "two-prompts", "kill_at": "admit"}}
    assert runner_cmd == "node runner.mjs --config {{config}}"
    assert hermes_mode == "real:{hermes}"
    assert isinstance(case_seed, int)
'''
    make_project(pytester, cases)
    r, doc = run(pytester, "--runner-cmd", "node runner.mjs --config {config}",
                 "--hermes", f"real:{hermes}")
    assert statuses(doc) == {"GEN-001": "pass"}, r.stdout.str()
    assert doc["hermes"] == f"real:{hermes}"


def test_seed_is_printed_and_reproduces_case_seeds(pytester: pytest.Pytester) -> None:
    make_project(pytester)
    r1, d1 = run(pytester, "--conformance-seed", "1234")
    assert "seed 1234" in r1.stdout.str()
    _, d2 = run(pytester, "--conformance-seed", "1234")
    assert [c["seed"] for c in d1["cases"]] == [c["seed"] for c in d2["cases"]]
    _, d3 = run(pytester, "--conformance-seed", "1235")
    assert [c["seed"] for c in d1["cases"]] != [c["seed"] for c in d3["cases"]]


def test_unreadable_baseline_is_a_usage_error(pytester: pytest.Pytester) -> None:
    make_project(pytester)
    r = pytester.runpytest(*engine_args("--conformance-baseline", "missing.txt"))
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    assert "cannot read baseline" in r.stderr.str()


def test_strict_asyncio_mode_works_for_async_cases(pytester: pytest.Pytester) -> None:
    make_project(pytester)
    pytester.makeini("[pytest]\nasyncio_mode = strict\n"
                      "asyncio_default_fixture_loop_scope = function\n")
    _, doc = run(pytester, "--conformance-cases", "GEN-001")
    assert statuses(doc) == {"GEN-001": "pass"}
