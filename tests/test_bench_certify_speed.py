"""The pure parts of ``bench/certify_speed.py``: its arguments, the median/ratio table, and the
lines it picks out of certify's and pytest's output. Nothing here runs or times anything (the
bench's figures are never asserted)."""
from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from bench.certify_speed import (
    DEFAULT_CMD,
    WHATS,
    Row,
    cell,
    counting_cmd,
    cpu_floor,
    format_table,
    parser,
    pytest_summary,
    ratio,
    side_env,
    spread,
    target_note,
    verdict_line,
)


def test_defaults() -> None:
    args = parser().parse_args([])
    assert (args.against, args.runs, args.what, args.profile, args.jobs, args.starts) == (
        None, 3, WHATS, "core", None, 5)
    assert args.runner_cmd == DEFAULT_CMD and "-m runner_ref --config {config}" in DEFAULT_CMD
    assert not args.keep and not args.floor_only


def test_options() -> None:
    args = parser().parse_args(["--against", "f530b09", "--runs", "1", "--what", "pytest",
                                "-j", "4", "--starts", "2", "--keep"])
    assert (args.against, args.runs, args.what, args.jobs, args.starts, args.keep) == (
        "f530b09", 1, ("pytest",), 4, 2, True)


@pytest.mark.parametrize(("text", "expected"), [
    ("certify", ("certify",)), ("pytest,certify", ("certify", "pytest")),
    (" certify , pytest ,", ("certify", "pytest")), ("certify,certify", ("certify",))])
def test_what_is_a_subset_in_a_fixed_order(text: str, expected: tuple[str, ...]) -> None:
    assert parser().parse_args(["--what", text]).what == expected


@pytest.mark.parametrize("argv", [["--what", "tests"], ["--what", ","], ["--runs", "0"],
                                  ["-j", "0"], ["--starts", "-1"]])
def test_bad_arguments_are_refused(argv: list[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        parser().parse_args(argv)
    assert exc.value.code == 2


def test_spread_cell_and_ratio() -> None:
    assert spread([]) is None
    assert spread([3.0, 1.0, 2.0, 10.0]) == (2.5, 1.0, 10.0)
    assert cell([55.25, 61.0, 55.2], ".1f") == "55.2 (55.2–61.0)"
    assert cell([0.4567], ".0f") == "0"  # one run: no min–max
    assert cell([], ".1f") == "–"
    assert ratio([50.0, 60.0, 40.0], [25.0]) == "0.50"
    assert ratio([], [1.0]) == ratio([1.0], []) == ratio([0.0], [1.0]) == "–"


def test_table_two_sides() -> None:
    lines = format_table(["A", "B"], [
        Row("certify core wall, s  (target ≤ 25 s)", [[60.0, 62.0, 58.0], [30.0, 31.0, 29.0]]),
        Row("floor, ms", [[480.0], []], ".0f")])
    assert len(lines) == 3
    head, wall, floor = lines
    assert head.split() == ["figure", "A", "B", "B/A"]
    assert wall.startswith("certify core wall, s  (target ≤ 25 s)")
    assert wall.split()[-5:] == ["60.0", "(58.0–62.0)", "30.0", "(29.0–31.0)", "0.50"]
    assert floor.split()[-3:] == ["480", "–", "–"]
    # the columns line up: every cell ends where its header ends
    assert len({len(line) for line in lines}) == 1


def test_table_one_side_has_no_ratio() -> None:
    head, row = format_table(["B"], [Row("pytest wall, s", [[61.5]])])
    assert head.split() == ["figure", "B"]
    assert row.split()[-1] == "61.5"


def test_targets() -> None:
    assert target_note("certify", "core") == "  (target ≤ 25 s)"
    assert target_note("pytest", "core") == target_note("pytest", "all") == "  (target ≤ 60 s)"
    assert target_note("certify", "all") == ""  # the issue sets no target for other profiles


def test_verdict_and_summary_lines() -> None:
    certify_out = ("family  pass\nGEN     12\n"
                   "CONFORMS  profile core  MUST 120/120  SHOULD 40/40  seed 7  bundle /tmp/x/\n"
                   "cause: something\n")
    assert verdict_line(certify_out).startswith("CONFORMS  profile core  MUST 120/120")
    assert verdict_line("certify: error: boom\n") == "(no verdict line)"
    pytest_out = ("bringing up nodes...\n........s..F\nFAILED conformance/cases/test_x.py::t\n"
                  "1 failed, 208 passed, 12 skipped in 80.12s (0:01:20)\n")
    assert pytest_summary(pytest_out) == "1 failed, 208 passed, 12 skipped in 80.12s (0:01:20)"
    assert pytest_summary("===== 3 passed in 1.20s =====\n") == "3 passed in 1.20s"
    assert pytest_summary("ERROR: usage\n") == "(no summary line)"


def test_side_env_puts_the_side_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    other = tmp_path / "other"
    (other / "conformance").mkdir(parents=True)
    (other / "conformance" / "certify.py").write_text("")
    monkeypatch.setenv("PYTHONPATH", f"{other}:/opt/lib")
    monkeypatch.setenv("HERMES_TEAM_RUNNER", "1")
    env = side_env(tmp_path / "side")
    assert env["PYTHONPATH"].split(":") == [str(tmp_path / "side"), "/opt/lib"]
    assert "HERMES_TEAM_RUNNER" not in env


def test_the_counting_wrapper_counts_each_start_and_is_the_runner_itself(tmp_path: Path) -> None:
    """Behind ``counting_cmd`` the runner command runs as the same process (``exec``: the
    harness's signals reach the runner itself), with its arguments untouched, and every start
    adds one byte to the tally."""
    tally = tmp_path / "tally"
    probe = f"{shlex.quote(sys.executable)} -c 'import os, sys; print(os.getpid(), sys.argv[1:])'"
    for _ in range(3):
        argv = shlex.split(counting_cmd(probe, tally) + " --config 'a b.json'")
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
        out, _ = proc.communicate(timeout=30)
        assert out.split(" ", 1) == [str(proc.pid), "['--config', 'a b.json']\n"]
    assert tally.stat().st_size == 3


def test_cpu_floor() -> None:
    assert cpu_floor(160, 0.25, 2) == 20.0
    assert cpu_floor(160, 0.25, 0) == 40.0  # no core count: one core
