"""The reference runner's ``--version`` answer lands on its certificate (the command is a
string here: the suite never imports the runner)."""

from __future__ import annotations

import sys

from conformance.reference_cmd import REFERENCE_RUNNER_CMD
from conformance.report.certificate import certificate_md, runner_version


def test_the_certificate_names_the_reference_runner_version() -> None:
    answer = runner_version(REFERENCE_RUNNER_CMD)
    assert answer is not None and answer.startswith("hermes-runner-ref ")
    md = certificate_md({"runner": {"command": REFERENCE_RUNNER_CMD, "version": answer},
                         "verdict": "pass", "profile": "core", "must": {"passed": 1, "total": 1},
                         "should": {"passed": 0, "total": 0}, "counts": {"pass": 1},
                         "baseline": None, "harness_version": "x", "seed": 1, "date": "d"})
    assert f"| runner version | `{answer}` |" in md and sys.executable in md
