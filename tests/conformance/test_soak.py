"""``certify --soak`` and ``--example-db`` (conformance/soak.py, conformance/hypothesis_profiles.py).

The slow tests use the ``receipt-cap`` control with a cap of 1 (``$NC_RECEIPT_CAP``): the dedupe
machine meets it in most examples, yet its pinned stories pass (each replays the newest row), so
what fails is a Hypothesis example — saved, then replayed first by the next run.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pytest
from hypothesis.database import DirectoryBasedExampleDatabase

from conformance import certify, hypothesis_profiles
from conformance.machines.families import MACHINES
from conformance.machines.run import MachineFailed, run_machine
from conformance.results import validate
from conformance.soak import DurationError, parse_duration, replay_command, soaked_cases
from negative_controls.controls_ledger import CAP_ENV

CAPPED = (f"env {CAP_ENV}=1 {sys.executable} -m negative_controls receipt-cap "
          "--config {config}")


@pytest.mark.parametrize(("text", "seconds"), [("90s", 90), ("10m", 600), ("1h30m", 5400),
                                               ("2m30s", 150), (" 5M ", 300)])
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "10", "5x", "m10", "1.5m", "0s", "10m 5s", "-1m"])
def test_bad_durations(text: str) -> None:
    with pytest.raises(DurationError):
        parse_duration(text)


def _args(**kw: object) -> argparse.Namespace:
    base: dict[str, object] = {"profile": "core", "cases": None, "catalogue": None,
                               "hermes": "scripted"}
    return argparse.Namespace(**{**base, **kw})


def test_a_soak_selects_the_families_and_the_matrix_only() -> None:
    ids = soaked_cases(_args())
    assert ids and all(i.startswith(("PROP-", "FLT-")) for i in ids)
    assert {"PROP-002", "FLT-001"} <= set(ids)
    assert soaked_cases(_args(cases="PROP-002,DED-*")) == ["PROP-002"]
    assert soaked_cases(_args(cases="DED-*")) == []


def test_the_replay_command_names_the_database_and_the_case() -> None:
    line = replay_command(_args(), "run --config {config}", "PROP-002", ["/db", "github:o/r"], 7)
    assert line == ("python -m conformance certify --runner-cmd 'run --config {config}' "
                    "--profile core --cases PROP-002 --example-db /db --example-db github:o/r "
                    "--seed 7")


@pytest.mark.parametrize(("argv", "says"), [
    (["--soak", "5x"], "is not a duration"),
    (["--soak", "10s", "--cases", "DED-*"], "no PROP-* or FLT-* case"),
    (["--example-db", "github:nobody"], "github:OWNER/REPO"),
])
def test_bad_soak_invocations_are_one_line(argv: list[str], says: str,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    assert certify.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert says in err and len(err.splitlines()) == 1


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_failure_is_saved_and_replays_first(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """The machine level: fresh seeds until the dedupe machine fails, then another seed; the
    saved example is the new run's first (``first_failing_example`` 1)."""
    monkeypatch.setenv(hypothesis_profiles.ENV, "smoke")
    db = DirectoryBasedExampleDatabase(str(tmp_path / "db"))
    hypothesis_profiles.use_database(db)
    try:
        found = None
        for seed in range(1, 9):
            try:
                run_machine(MACHINES["dedupe"], CAPPED, seed=seed, pins=False, key="PROP-002")
            except MachineFailed as exc:
                found = exc
                break
        assert found is not None, "eight fresh seeds never met a cap of 1"
        assert list(db.fetch(hypothesis_profiles.machine_key("PROP-002")))
        with pytest.raises(MachineFailed) as again:
            run_machine(MACHINES["dedupe"], CAPPED, seed=seed + 10_000, pins=False,
                        key="PROP-002")
        assert again.value.stats["first_failing_example"] == 1, again.value.stats
    finally:
        hypothesis_profiles.use_database(None)


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_certify_soak_then_a_plain_certify_fails_at_once(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]
                                                          ) -> None:
    """The command level: ``certify --soak`` finds PROP-002, records its seeds and the replay
    command in results.json; the plain certify it prints fails on the first example."""
    monkeypatch.setenv(hypothesis_profiles.ENV, "smoke")
    db, soak_out, plain_out = tmp_path / "db", tmp_path / "soak", tmp_path / "plain"
    code = certify.main(["--soak", "3m", "--cases", "PROP-002", "--runner-cmd", CAPPED,
                         "--example-db", str(db), "--out", str(soak_out), "--no-progress"])
    out = capsys.readouterr().out
    assert code == 1, out
    doc = json.loads((soak_out / "results.json").read_text())
    validate(doc)
    soak = doc["soak"]
    assert soak["seeds"] and len(soak["seeds"]) == len(soak["rounds"])
    (finding,) = soak["found"]
    assert finding["case"] == "PROP-002" and f"--example-db {db}" in finding["replay"]
    assert finding["replay"] in out.replace("\n", "")
    code = certify.main(["--cases", "PROP-002", "--runner-cmd", CAPPED, "--example-db",
                         str(db), "--out", str(plain_out), "--no-progress"])
    assert code == 1
    (case,) = json.loads((plain_out / "results.json").read_text())["cases"]
    assert case["status"] == "fail" and case["data"]["first_failing_example"] == 1, case
