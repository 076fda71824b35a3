"""The self-test: every positive control certifies with 0 failures, 3 runs in a row (issue 21).

Mechanics (:mod:`positive_controls.verify`): ``python -m conformance certify --profile
team-tools`` (every core case is in it, so one run certifies both profiles) against
``python -m positive_controls NAME --seed S --config {config}``; any case not ``pass`` /
``not-applicable`` fails this test with its cause — a correct runner was failed, a suite
defect. CI certifies the composite ``both`` (every choice row and every CI slow row at once:
one certify per run fits the CI budget); ``contrary``, ``slow`` and each row alone are certified
by the nightly ``python -m positive_controls.verify contrary slow --each --runs 3``; each row's patch is proven in effect by
its probe (``test_probes.py``). ``POSCTL_RUNS`` changes the number of runs (default 3).
"""
from __future__ import annotations

import os

import pytest

from positive_controls.registry import CI_COMPOSITES
from positive_controls.verify import RUN_TIMEOUT, Run, certify, report

RUNS = int(os.environ.get("POSCTL_RUNS", "3"))
#: certify's workers: a slow control mostly waits, so 4 workers on 2 cores finish sooner
#: (certify's own note: core at -j 4 in 100 s, at -j 2 in 171 s).
JOBS = 4

#: Cases that fail on a positive control for a known suite defect being fixed elsewhere
#: (control → case → why). Their failure is reported, not hidden: the test xfails naming them.
KNOWN_DEFECTS: dict[str, dict[str, str]] = {
    "both": {
        "FLT-001": "the fault matrix creates sessions without params.profile, which "
                   "refuses-missing-profile refuses (issue 21 item 3, another helper)",
        "FLT-002": "the same, and a cell that reads a runner_offline the control plane caused "
                   "as the runner's (issue 21 items 3-4, another helper)",
        "FLT-003": "a replay the control plane ended runner_offline is read as a lost receipt "
                   "(issue 21 item 4, another helper)",
        "REC-006": "the race's third ordering (the next poll already in the gates) is failed "
                   "(issue 21 item 3, another helper)",
        "INC-003": "cause not established: on a world kept after PERM-013, in full runs only, "
                   "with any control that delays the admit (late-admit alone does it), its "
                   "first command (gateway.open) ends 503 runner_offline 0.2 s into the case; "
                   "the handed-over held poll ended client_gone (reported to the lead)",
    },
}


@pytest.mark.slow
@pytest.mark.timeout(RUNS * RUN_TIMEOUT + 120)
@pytest.mark.xdist_group("positive-controls")
@pytest.mark.parametrize("name", CI_COMPOSITES)
def test_positive_control_certifies_clean_runs_in_a_row(name: str, record_property) -> None:
    runs: list[Run] = []
    for _ in range(RUNS):
        run = certify(name, jobs=JOBS)
        runs.append(run)
        if not run.clean:
            break
    record_property("posctl_rows", report(runs))
    print(report(runs))
    bad = {cid for r in runs for cid in r.bad}
    known = KNOWN_DEFECTS.get(name, {})
    if bad and bad <= set(known):
        pytest.xfail("known suite defects, fixed elsewhere: " + "; ".join(
            f"{cid}: {known[cid]}" for cid in sorted(bad)))
    assert not bad, f"{name} (a correct runner) was failed:\n{report(runs)}"
    assert len(runs) == RUNS and all(r.clean for r in runs)
