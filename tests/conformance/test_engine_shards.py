"""``certify --shard K/N`` and ``python -m conformance merge`` end to end on the in-test project:
four shards merged give the statuses, verdict, exit code and JUnit of one unsharded run; each
shard records its share and the selection; merge refuses, in one line and exit 2, bundles that
are not the parts of one run. (The same against the reference runner's core profile:
tests/conformance/test_shards_core.py, slow.)"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from conformance import merge
from conformance.results import validate

from .test_engine_certify import ROOT, RUNNER, certify_proc, project

SEED = "42"
COMMON = ("--runner-cmd", RUNNER, "--profile", "all", "--baseline", "baseline.txt",
          "--seed", SEED)


def statuses(bundle: Path) -> dict[str, str]:
    doc = json.loads((bundle / "results.json").read_text())
    return {c["id"]: c["status"] for c in doc["cases"]}


def junit_outcomes(bundle: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    for case in ET.parse(bundle / "junit.xml").getroot().iter("testcase"):
        cid = next(p.get("value") for p in case.iter("property") if p.get("name") == "case_id")
        tags = [el.tag for el in case if el.tag in ("failure", "error", "skipped")]
        out[str(cid)] = tags[0] if tags else "passed"
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    cwd = project(tmp_path_factory.mktemp("shards"))
    whole = certify_proc(cwd, *COMMON, "--out", "whole", "-j", "1")
    parts = []
    for k in range(1, 5):
        # shard 1 on two workers: its share reaches results.json from an xdist worker
        jobs = "2" if k == 1 else "1"
        parts.append(certify_proc(cwd, *COMMON, "--shard", f"{k}/4", "--out", f"s{k}", "-j", jobs))
    return {"cwd": cwd, "whole": whole, "parts": parts}


def run_merge(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "conformance", "merge", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})


def test_each_shard_ran_its_share(runs: dict[str, Any]) -> None:
    cwd: Path = runs["cwd"]
    assigned: list[str] = []
    for k, proc in enumerate(runs["parts"], start=1):
        assert proc.returncode in (0, 1), proc.stderr[-2000:]
        doc = json.loads((cwd / f"s{k}" / "results.json").read_text())
        validate(doc)
        shard = doc["shard"]
        assert (shard["index"], shard["total"]) == (k, 4)
        assert sorted(c["id"] for c in doc["cases"]) == shard["cases"]
        assert shard["selection"]["count"] == len(statuses(cwd / "whole"))
        assert json.loads((cwd / f"s{k}" / "certificate.json").read_text())["shard"] == f"{k}/4"
        assigned += shard["cases"]
    assert sorted(assigned) == sorted(statuses(cwd / "whole"))


def test_four_shards_merged_are_the_unsharded_run(runs: dict[str, Any]) -> None:
    cwd: Path = runs["cwd"]
    proc = run_merge(cwd, "s1", "s2", "s3", "s4", "--out", "merged")
    assert proc.returncode == runs["whole"].returncode == 1, proc.stderr  # GEN-002 fails
    assert statuses(cwd / "merged") == statuses(cwd / "whole")
    merged = json.loads((cwd / "merged" / "results.json").read_text())
    whole = json.loads((cwd / "whole" / "results.json").read_text())
    validate(merged)
    assert merged["summary"] == whole["summary"]
    assert "shard" not in merged and [s["index"] for s in merged["shards"]] == [1, 2, 3, 4]
    assert junit_outcomes(cwd / "merged") == junit_outcomes(cwd / "whole")
    suite = ET.parse(cwd / "merged" / "junit.xml").getroot().find("testsuite")
    assert suite is not None and suite.get("tests") == str(len(statuses(cwd / "whole")))
    cert = json.loads((cwd / "merged" / "certificate.json").read_text())
    assert cert["verdict"] == whole["summary"]["verdict"] and cert["shards"] == 4
    for name in ("report.html", "certificate.md", "badge.svg"):
        assert (cwd / "merged" / name).stat().st_size > 0


def _edit(bundle: Path, change: Callable[[dict[str, Any]], None]) -> None:
    path = bundle / "results.json"
    doc = json.loads(path.read_text())
    change(doc)
    path.write_text(json.dumps(doc))


def _seed(d: dict[str, Any]) -> None:
    d["seed"] = 7


def _runner(d: dict[str, Any]) -> None:
    d["runner_cmd"] = "other --config {config}"


def _profile(d: dict[str, Any]) -> None:
    d["profile"] = "core"


def _harness(d: dict[str, Any]) -> None:
    d["harness_version"] = "9.9"


def _steal(d: dict[str, Any]) -> None:  # shard 2 claims a case of shard 1 as well (below)
    raise AssertionError("applied by the test")


def _unsharded(d: dict[str, Any]) -> None:
    del d["shard"]


def _malformed(d: dict[str, Any]) -> None:
    del d["shard"]["cases"]


@pytest.mark.parametrize("bundles, change, why", [
    (["s1", "s2", "s3"], None, "missing shard 4 of 4"),
    (["s1", "s2", "s3", "s4", "s2"], None, "duplicate shard: shard 2/4"),
    (["s1", "s2", "s3", "s4"], _seed, "different runs: seed 7 vs 42"),
    (["s1", "s2", "s3", "s4"], _runner, "different runs: runner command"),
    (["s1", "s2", "s3", "s4"], _profile, "different runs: profile 'core' vs 'all'"),
    (["s1", "s2", "s3", "s4"], _harness, "different runs: harness version '9.9'"),
    (["s1", "s2", "s3", "s4"], _steal, "is in two shards"),
    (["s1", "s2", "s3", "s4"], _unsharded, "is not a shard's bundle"),
    (["s1", "s2", "s3", "s4"], _malformed, "s2: malformed shard in results.json"),
    (["s1", "nowhere"], None, "cannot read results nowhere/results.json"),
])
def test_merge_refuses_what_is_not_one_run(runs: dict[str, Any], tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str], bundles: list[str],
                                           change: Callable[[dict[str, Any]], None] | None,
                                           why: str, monkeypatch: pytest.MonkeyPatch) -> None:
    for k in range(1, 5):
        shutil.copytree(runs["cwd"] / f"s{k}", tmp_path / f"s{k}")
    if change is _steal:
        first = json.loads((tmp_path / "s1" / "results.json").read_text())["shard"]["cases"][0]
        _edit(tmp_path / "s2", lambda d: d["shard"].update(
            cases=sorted({*d["shard"]["cases"], first})))
    elif change is not None:
        _edit(tmp_path / "s2", change)
    monkeypatch.chdir(tmp_path)
    capsys.readouterr()
    assert merge.main([*bundles, "--out", "merged"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("merge: error: ") and why in err and err.count("\n") == 1, err
    assert not (tmp_path / "merged").exists()  # refused before anything is written


def test_a_bad_shard_is_one_line_exit_2(runs: dict[str, Any]) -> None:
    for args, why in [(("--shard", "5/4"), "K must be between 1 and N"),
                      (("--shard", "1/9"), "9 shards for 8 selected cases"),
                      (("--durations", "d.json"), "only read with --shard")]:
        proc = certify_proc(runs["cwd"], *COMMON, *args)
        assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
        assert why in proc.stderr


def test_a_case_a_shard_did_not_record_is_merged_not_run(runs: dict[str, Any], tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    for k in range(1, 5):
        shutil.copytree(runs["cwd"] / f"s{k}", tmp_path / f"s{k}")
    dropped: list[str] = []

    def drop(d: dict[str, Any]) -> None:  # the shard stopped before its last case
        dropped.append(d["cases"].pop()["id"])

    _edit(tmp_path / "s3", drop)
    monkeypatch.chdir(tmp_path)
    merge.main(["s1", "s2", "s3", "s4", "--out", "merged"])
    got = statuses(tmp_path / "merged")
    assert got[dropped[0]] == "not-run"
    assert {c: s for c, s in got.items() if c != dropped[0]} == {
        c: s for c, s in statuses(runs["cwd"] / "whole").items() if c != dropped[0]}
