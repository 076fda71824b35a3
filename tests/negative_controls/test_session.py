"""The self-test's driver runs the suite's session from the same builder as certify
(conformance/session_cmd.py): the same collection and session part, the same option spelling;
its own are the quiet terminal, pytest-timeout's ``timeout = 180`` in its ini, and its runner
commands (the reference runner's from conformance/reference_cmd.py)."""

from __future__ import annotations

from pathlib import Path

from conformance import certify
from conformance.reference_cmd import REFERENCE_RUNNER_CMD
from conformance.session_cmd import (
    Options,
    collect_args,
    conformance_args,
    ini_text,
    session_args,
)
from negative_controls import verify


def test_certify_and_the_negative_driver_share_the_builders_session(tmp_path: Path) -> None:
    ini, out = tmp_path / "pytest.ini", tmp_path / "out"
    common = [*collect_args(str(verify.ROOT)), *session_args(str(ini))]
    assert verify.ROOT == certify.ROOT
    args = certify.parser().parse_args(["--cases", "DED-001"])
    args.seed, args.jobs = 1, 1
    ours = certify.pytest_args(args, "r --config {config}", out, ini)
    theirs = verify.pytest_args("c --config {config}", ["DED-002", "DED-001"], out, ini)
    assert ours[:len(common)] == common and theirs[:len(common)] == common
    assert theirs == [*common, *conformance_args(Options(
        "c --config {config}", str(out), cases="DED-002,DED-001", lanes=verify.LANES)), "-q"]
    assert "--conformance-cases" in ours and "--conformance-cases" in theirs


def test_the_negative_driver_keeps_its_case_timeout() -> None:
    assert verify.INI == ini_text(timeout=180) and "timeout = 180\n" in verify.INI
    assert certify.INI == ini_text() and "timeout" not in certify.INI


def test_the_reference_runner_is_the_one_template() -> None:
    assert verify.runner_cmd(None) == REFERENCE_RUNNER_CMD
    assert " -m negative_controls no-reset-header --config {config}" in verify.runner_cmd(
        "no-reset-header")
