"""``python -m conformance certify`` end to end on the in-test project: exit codes, the bundle
(results.json against its schema, junit, report.html, certificate, badge), several runners side
by side, and the bad invocations that exit 2. The bundle (written from a parallel run, ``-j 2``)
and a bad invocation run as a subprocess, as a vendor runs certify; the other runs call
``certify.main`` in this process (``pytester`` keeps their imports from leaking into later
tests)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from markupsafe import escape

from conformance import certify
from conformance.results import validate

from .engine_sample import CASES, CATALOGUE, SECRET, WITNESS, WORLD

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[2]
RUNNER = f"{sys.executable} -c pass --config {{config}}"


def project(path: Path) -> Path:
    (path / "samplecat.py").write_text(CATALOGUE)
    (path / "sampleworld.py").write_text(WORLD)
    (path / "test_cases.py").write_text(textwrap.dedent(CASES))
    (path / "baseline.txt").write_text("DED-002\nISO-001\n")
    return path


def certify_proc(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(cwd)])}
    argv = [sys.executable, "-m", "conformance", "certify", "--suite", "test_cases.py",
            "--catalogue", "samplecat:CAT", "--world", "sampleworld:open_world", "--no-progress",
            *args]
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def certify_here(pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str],
                 *args: str) -> tuple[int, str]:
    """``certify.main`` in this process, in the project ``pytester`` made: (exit code, stdout)."""
    project(pytester.path)
    pytester.syspathinsert()
    pytester.chdir()
    capsys.readouterr()
    code = certify.main(["--suite", "test_cases.py", "--catalogue", "samplecat:CAT",
                         "--world", "sampleworld:open_world", "--no-progress", *args])
    return code, capsys.readouterr().out


WORKER_MARK = """
from pathlib import Path

def pytest_configure(config):
    if hasattr(config, "workerinput"):  # an xdist worker of certify's session, not its controller
        Path("workers").mkdir(exist_ok=True)
        (Path("workers") / config.workerinput["workerid"]).touch()
"""


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], Path]:
    cwd = project(tmp_path_factory.mktemp("certify"))
    (cwd / "runner.mjs").write_text("// the vendor's runner\n")
    # Two workers, as certify's default -j gives a vendor: the bundle is written from the
    # results of a parallel run. Each xdist worker leaves its name under workers/, so a test can
    # see that the run was parallel.
    (cwd / "conftest.py").write_text(WORKER_MARK)
    proc = certify_proc(cwd, "--runner-cmd", RUNNER, "--profile", "all", "--baseline",
                        "baseline.txt", "--runner-file", "runner.mjs", "--out", "out",
                        "--seed", "42", "-j", "2")
    return proc, cwd / "out"


def test_failing_must_exits_1_and_writes_the_bundle(bundle) -> None:
    proc, out = bundle
    assert proc.returncode == 1, proc.stderr
    assert sorted(p.name for p in out.iterdir() if p.is_file()) == [
        "badge.svg", "certificate.json", "certificate.md", "junit.xml", "report.html",
        "results.json"]
    assert "Traceback" not in proc.stderr
    assert "FAIL" in proc.stdout and "GEN-002" in proc.stdout and "seed 42" in proc.stdout


def test_the_parallel_run_gives_what_a_serial_run_gives(
        bundle, pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]) -> None:
    """The bundle's run had two workers: every case has the status and the seed a serial run with
    the same seed gives it, in the same order, and a failing case keeps its transcript and
    witness across the worker boundary."""
    _, out = bundle
    assert sorted(p.name for p in (out.parent / "workers").glob("*")) == ["gw0", "gw1"]
    parallel = json.loads((out / "results.json").read_text())
    code, _ = certify_here(pytester, capsys, "--runner-cmd", RUNNER, "--profile", "all",
                           "--baseline", "baseline.txt", "--out", "out", "--seed", "42")
    serial = json.loads((pytester.path / "out" / "results.json").read_text())
    assert code == 1

    def cases(doc: dict) -> list[tuple[str, str, int]]:
        return [(c["id"], c["status"], c["seed"]) for c in doc["cases"]]

    assert cases(parallel) == cases(serial)
    statuses = {c["id"]: c["status"] for c in parallel["cases"]}
    assert statuses["DED-002"] == "expected-fail" and statuses["ISO-001"] == "stale"
    cfg = next(c for c in parallel["cases"] if c["id"] == "CFG-001")
    assert cfg["status"] == "fail" and cfg["transcript"] and cfg["witness"]


def test_results_json_validates_against_the_published_schema(bundle) -> None:
    _, out = bundle
    doc = json.loads((out / "results.json").read_text())
    validate(doc)
    assert doc["schema_version"] == 2 and doc["seed"] == 42 and doc["profile"] == "all"
    published = json.loads((ROOT / "docs" / "results.schema.json").read_text())
    shipped = json.loads((ROOT / "conformance" / "report" / "results.schema.json").read_text())
    assert published == shipped


def test_schema_refuses_a_broken_document(bundle) -> None:
    import jsonschema

    _, out = bundle
    doc = json.loads((out / "results.json").read_text())
    doc["cases"][0]["status"] = "passed-ish"
    with pytest.raises(jsonschema.ValidationError):
        validate(doc)
    del doc["cases"][0]
    doc.pop("seed")
    with pytest.raises(jsonschema.ValidationError):
        validate(doc)


def test_junit_is_pytests_own_with_case_properties(bundle) -> None:
    _, out = bundle
    root = ET.parse(out / "junit.xml").getroot()
    suite = root if root.tag == "testsuite" else root.find("testsuite")
    assert suite is not None and suite.get("name") == "runner-conformance"
    props = {tc.get("name"): {p.get("name"): p.get("value") for p in tc.iter("property")}
             for tc in suite.iter("testcase")}
    assert props["test_fail"]["case_id"] == "GEN-002"
    assert props["test_fail"]["level"] == "MUST"
    assert props["test_fail"]["family"] == "generations"


def test_report_html_is_self_contained_redacted_and_escaped(bundle) -> None:
    _, out = bundle
    html = (out / "report.html").read_text()
    assert SECRET not in html
    assert "token=«redacted»" in html  # the redacted transcript and witness are shown
    escaped = str(escape(WITNESS))
    assert escaped != WITNESS and escaped in html  # the witness line, autoescaped, not raw markup
    assert '<details id="GEN-002" class="case" open>' in html
    assert "A stale-epoch result MUST be refused." in html
    for offline in ("<script src", "http://", "https://", "<link"):
        assert offline not in html
    assert html.count("<script>") == 1  # the route filter's few inline lines, nothing fetched


def test_certificate_figures_and_identity(bundle) -> None:
    _, out = bundle
    cert = json.loads((out / "certificate.json").read_text())
    assert cert["must"] == {"passed": 2, "total": 6}
    assert cert["should"] == {"passed": 0, "total": 1}
    assert cert["verdict"] == "fail" and cert["profile"] == "all"
    assert cert["runner"]["command"] == RUNNER
    import hashlib

    assert cert["runner"]["files"] == {
        "runner.mjs": hashlib.sha256(b"// the vendor's runner\n").hexdigest()}
    md = (out / "certificate.md").read_text()
    assert "| MUST | 2/6 passed |" in md and "**Verdict: FAIL**" in md
    svg = (out / "badge.svg").read_text()
    assert svg.startswith("<svg") and "all MUST 2/6" in svg


def test_passing_or_baselined_musts_exit_0(pytester: pytest.Pytester,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    (pytester.path / "b.txt").write_text("DED-002\n")
    code, out = certify_here(pytester, capsys, "--runner-cmd", RUNNER, "--cases",
                             "GEN-001,DED-002", "--baseline", "b.txt", "--out", "out")
    assert code == 0, out
    doc = json.loads((pytester.path / "out" / "results.json").read_text())
    assert {c["id"]: c["status"] for c in doc["cases"]} == {"GEN-001": "pass",
                                                          "DED-002": "expected-fail"}
    # a baselined MUST is a CI convenience, never a PASS on the certificate
    assert json.loads((pytester.path / "out" / "certificate.json").read_text())["verdict"] == "baselined"


def test_a_stale_baseline_entry_fails_the_run(pytester: pytest.Pytester,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    (pytester.path / "b.txt").write_text("GEN-001\n")
    code, out = certify_here(pytester, capsys, "--runner-cmd", RUNNER, "--cases", "GEN-001",
                             "--baseline", "b.txt", "--out", "out")
    assert code == 1
    assert "1 case stale: " in out and "[GEN-001]" in out  # its folded cause line


def test_several_runners_side_by_side(pytester: pytest.Pytester,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    other = f"{sys.executable} -c 'print(1)' --config {{config}}"
    code, _ = certify_here(pytester, capsys, "--runner-cmd", RUNNER, "--runner-cmd", other,
                           "--cases", "GEN-00*", "--out", "out")
    assert code == 1
    out = pytester.path / "out"
    matrix = (out / "matrix.md").read_text()
    assert "| GEN-001 | pass | pass |" in matrix and "| GEN-002 | fail | fail |" in matrix
    assert len([p for p in out.iterdir() if p.is_dir()]) == 2


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--runner-cmd", "node runner.mjs"], "must contain {config}"),
        (["--runner-cmd", "no-such-runner-xyz --config {config}"], "is not on PATH"),
        (["--runner-cmd", "./missing/runner --config {config}"], "is not an executable file"),
        (["--runner-cmd", "node 'unbalanced --config {config}"], "cannot be parsed"),
        (["--baseline", "does-not-exist.txt"], "cannot read baseline"),
        (["--baseline", "bad.txt"], "not a case ID"),
        (["--runner-file", "nope.bin"], "is not a readable file"),
        (["--hermes", "remote"], "--hermes must be"),
        (["--hermes", "real:./no-hermes-here"],
         "--hermes real:./no-hermes-here: hermes-agent not found"),
        (["--profile", "gold"], "invalid choice"),
        (["--frobnicate"], "unrecognized arguments"),
    ],
)
def test_bad_invocations_exit_2_with_one_line(
    args: list[str], message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bad.txt").write_text("GEN-001\nnot an id\n")
    assert certify.main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err and err.startswith("certify: error: ")


def test_bad_invocation_as_a_process_has_no_traceback(tmp_path: Path) -> None:
    proc = certify_proc(tmp_path, "--runner-cmd", "definitely-not-installed --config {config}")
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr


def test_version_argv_drops_the_config_argument() -> None:
    from conformance.report.certificate import runner_version, version_argv

    assert version_argv("node runner.mjs --config {config}") == ["node", "runner.mjs", "--version"]
    assert version_argv("run --config={config} -v") == ["run", "-v", "--version"]
    version = runner_version(f"{sys.executable} --config {{config}}")
    assert version is not None and version.startswith("Python 3")
    assert runner_version("no-such-binary-xyz --config {config}") is None
