"""Lanes (conformance/lanes.py): several cases in flight in one pytest process, each judged and
reported exactly as when they run one after the other."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from conformance import bounds
from conformance.kept_worlds import Kept, Pool
from conformance.lanes import WORKER_LANES

from .engine_sample import HARNESS_CASES, engine_args, make_project

pytest_plugins = ["pytester"]
ROOT = Path(__file__).resolve().parents[2]


def run(pytester: pytest.Pytester, lanes: int, *extra: str) -> tuple[pytest.RunResult, dict]:
    out = f"out{lanes}"
    r = pytester.runpytest(*engine_args("--conformance-out", out, "--conformance-lanes",
                                        str(lanes), "--junitxml", f"{out}.xml", *extra))
    doc = json.loads((pytester.path / out / "results.json").read_text())
    return r, doc


def judged(doc: dict) -> dict[str, tuple[str, str, str, str]]:
    return {c["id"]: (c["status"], c["expected"], c["actual"], c["detail"].split("\n")[0])
            for c in doc["cases"]}


def junit_counts(pytester: pytest.Pytester, lanes: int) -> tuple[str | None, ...]:
    suite = ET.parse(pytester.path / f"out{lanes}.xml").getroot().find("testsuite")
    assert suite is not None
    return tuple(suite.get(k) for k in ("tests", "failures", "errors", "skipped"))


def test_lanes_judge_every_kind_of_case_as_one_after_the_other(pytester: pytest.Pytester) -> None:
    """pass, fail, a SHOULD failing, expected-fail, stale, a secret leak, not-applicable: the
    same statuses, expectations, details and JUnit counts on four lanes as on one."""
    make_project(pytester)
    pytester.makefile(".txt", baseline="DED-002\nISO-001\n")
    _, one = run(pytester, 1, "--conformance-baseline", "baseline.txt")
    r, four = run(pytester, 4, "--conformance-baseline", "baseline.txt")
    assert judged(four) == judged(one)
    assert {c["status"] for c in four["cases"]} >= {"pass", "fail", "expected-fail", "stale",
                                                   "not-applicable"}
    assert junit_counts(pytester, 4) == junit_counts(pytester, 1)
    assert four["summary"] == one["summary"]
    assert all(c["duration"] > 0 for c in four["cases"])


def test_harness_problems_and_undeclared_programs_on_lanes(pytester: pytest.Pytester) -> None:
    """timeout, error, and a program the row does not declare, counted on the case's own lane
    (the case beside it used nothing)."""
    make_project(pytester, HARNESS_CASES)
    _, one = run(pytester, 1)
    _, lanes = run(pytester, 4)
    assert {c["id"]: c["status"] for c in lanes["cases"]} == {
        "GEN-001": "timeout", "GEN-002": "error", "DED-002": "error", "TT-001": "pass"}
    assert judged(lanes) == judged(one)
    ded = next(c for c in lanes["cases"] if c["id"] == "DED-002")
    assert "does not declare needs=('faketime',)" in ded["detail"]


OWN_USES = '''
import asyncio
from conformance import environment
from conformance.marks import case

USED = {}

def _used():
    return USED.setdefault(asyncio.get_running_loop(), asyncio.Event())

@case("GEN-001")
async def test_first_uses_nothing(world):
    await asyncio.wait_for(_used().wait(), 5)  # judged after the case beside it used faketime

@case("DED-002")
async def test_second_uses_an_undeclared_program(world):
    environment.note_use("faketime")
    _used().set()
'''


def test_a_program_is_counted_for_the_case_that_used_it(pytester: pytest.Pytester) -> None:
    """The first case is reported after the second used faketime: the use is the second's
    (a count for the whole process would give it to the first case reported)."""
    make_project(pytester, OWN_USES)
    _, doc = run(pytester, 2)
    assert {c["id"]: c["status"] for c in doc["cases"]} == {"GEN-001": "pass", "DED-002": "error"}


TOGETHER = '''
import asyncio
from conformance.marks import case

IN_FLIGHT = []
ALL_IN = {}

async def _meet(name):
    """Wait (bounded) until three cases are in flight at once."""
    loop = asyncio.get_running_loop()
    event = ALL_IN.setdefault(loop, asyncio.Event())
    IN_FLIGHT.append(name)
    if len(IN_FLIGHT) >= 3:
        event.set()
    await asyncio.wait_for(event.wait(), 5)

@case("GEN-001")
async def test_a(world):
    await _meet("a")

@case("GEN-002")
async def test_b(world):
    await _meet("b")

@case("DED-001")
async def test_c(world):
    await _meet("c")
'''


def test_cases_on_lanes_are_in_flight_together(pytester: pytest.Pytester) -> None:
    """Three cases that each wait for the three to be in flight: all pass on three lanes; one
    after the other, none can (the check can fail)."""
    make_project(pytester, TOGETHER)
    _, three = run(pytester, 3)
    assert {c["status"] for c in three["cases"]} == {"pass"}
    _, one = run(pytester, 1, "-k", "test_a")
    assert [c["status"] for c in one["cases"]] == ["timeout"]


BOUNDED = '''
import asyncio
import pytest
from conformance.marks import case

@case("GEN-001")
@pytest.mark.timeout(0.5)
async def test_hangs(world):
    await asyncio.Event().wait()

@case("GEN-002")
async def test_passes(world):
    assert True
'''


def test_a_case_over_its_bound_is_a_timeout_and_the_others_go_on(
        pytester: pytest.Pytester) -> None:
    make_project(pytester, BOUNDED)
    _, doc = run(pytester, 2)
    got = {c["id"]: c for c in doc["cases"]}
    assert got["GEN-001"]["status"] == "timeout"
    assert "Timeout >0.5s" in got["GEN-001"]["detail"]
    assert got["GEN-002"]["status"] == "pass"


SYNC = '''
import threading
from conformance.casefixtures import pool_of
from conformance.kept_worlds import Pool
from conformance.marks import case

MAIN = threading.main_thread()

@case("GEN-001")
def test_sync_with_request(request, runner_cmd):
    assert threading.current_thread() is not MAIN  # a thread of its own
    assert request.getfixturevalue("case_seed") == request.node.stash[
        __import__("conformance.judge", fromlist=["STATE"]).STATE].seed
    assert request.config.getoption("conformance_lanes") == 2
    real = request.config.pluginmanager.getplugin("conformance-session").config
    assert isinstance(pool_of(request.config), Pool) and pool_of(request.config) is not pool_of(real)
    assert "{config}" in runner_cmd

@case("GEN-002")
async def test_async(world, case_seed, case_row):
    assert case_row.id == "GEN-002" and isinstance(case_seed, int)
'''


def test_a_synchronous_case_runs_in_a_thread_with_its_own_pool(pytester: pytest.Pytester) -> None:
    make_project(pytester, SYNC)
    _, doc = run(pytester, 2)
    assert {c["id"]: c["status"] for c in doc["cases"]} == {"GEN-001": "pass", "GEN-002": "pass"}


def test_lanes_must_be_one_or_more(pytester: pytest.Pytester) -> None:
    make_project(pytester)
    r = pytester.runpytest(*engine_args("--conformance-lanes", "0"))
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    assert "--conformance-lanes must be 1 or more" in r.stderr.str()
    assert WORKER_LANES == 2


async def test_a_world_no_case_to_come_can_use_is_closed_not_kept() -> None:
    closed: list[str] = []

    async def closer() -> None:
        closed.append("k")

    pool = Pool(wanted=lambda key: False)
    why = await pool.give_back(Kept(world=object(), key="k", closer=closer), passed=True,
                               begun=Any)  # type: ignore[arg-type]
    assert why is not None and why.startswith("unwanted") and closed == ["k"]
    assert pool.kept == []


BESIDE_A_TEST = '''
from conformance.marks import case

STARTED = []

@case("GEN-001")
async def test_a(world):
    STARTED.append("a")

def test_ordinary():
    assert STARTED == ["a"], STARTED  # b is not run ahead past an ordinary test

@case("GEN-002")
async def test_b(world):
    STARTED.append("b")
'''


def test_nothing_runs_ahead_past_an_ordinary_test(pytester: pytest.Pytester) -> None:
    """An ordinary test runs alone (it may patch what a case reads): the case after it is not
    started while it runs, though there are lanes to spare."""
    make_project(pytester, BESIDE_A_TEST)
    r, doc = run(pytester, 3)
    r.assert_outcomes(passed=3)
    assert {c["id"]: c["status"] for c in doc["cases"]} == {"GEN-001": "pass", "GEN-002": "pass"}


def test_one_process_on_lanes_starts_the_costly_cases_first(pytester: pytest.Pytester) -> None:
    """In a plain session on lanes the cases run in ``lane_order`` by the recorded durations
    (``--conformance-durations``): costliest first here, as no sample case shares a world; on
    one lane the order stays the collection's."""
    make_project(pytester)
    costs = {"GEN-001": 0.1, "GEN-002": 5.0, "DED-001": 0.2, "DED-002": 3.0, "TT-001": 0.3,
             "ISO-001": 4.0, "CFG-001": 1.0, "LIM-001": 2.0}
    pytester.makefile(".json", durations=json.dumps({"profiles": {"all": costs}}))

    def order(lanes: int) -> list[str]:
        r = pytester.runpytest(*engine_args("--collect-only", "-q", "--conformance-lanes",
                                            str(lanes), "--conformance-durations",
                                            "durations.json"))
        return [line.split("::")[1] for line in r.outlines if "::" in line]

    assert order(1) == ["test_pass", "test_fail", "test_should_fail", "test_baselined_fail",
                        "test_team_tools", "test_baselined_pass", "test_leak",
                        "test_not_advertised"]
    assert order(3) == ["test_fail", "test_baselined_pass", "test_baselined_fail",
                        "test_not_advertised", "test_leak", "test_team_tools",
                        "test_should_fail", "test_pass"]


@pytest.mark.parametrize("lanes", [1, 2])
def test_a_cases_own_timeout_is_scaled_by_the_multiplier(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, lanes: int) -> None:
    """A case's own ``@pytest.mark.timeout`` is a bound of the run like any other: under
    ``--timeout-multiplier`` it grows (pytest-timeout's bound on one lane, the lane's own on
    several), so a slow runner is given the time the vendor asked for; and an overrun bound
    is a ``timeout`` either way (pytest-timeout's own message too), never the runner's fail."""
    monkeypatch.setenv(bounds.ENV, "1")  # the multiplier lives in the environment: restored after
    make_project(pytester, """
import asyncio
import pytest
from conformance.marks import case

@case("GEN-001")
@pytest.mark.timeout(1)
async def test_takes_a_second_and_a_half(world):
    await asyncio.sleep(1.5)

@case("GEN-002")
async def test_passes(world):
    assert True
""")
    _, tight = run(pytester, lanes)
    _, scaled = run(pytester, lanes, "--timeout-multiplier", "5")
    assert {c["id"]: c["status"] for c in tight["cases"]}["GEN-001"] == "timeout"
    assert {c["id"]: c["status"] for c in scaled["cases"]}["GEN-001"] == "pass"


INTERRUPTED_WORLD = '''
import contextlib
from pathlib import Path

class World:
    secrets = set()
    features = set()

    def transcript(self):
        return []

    def scan_for_secrets(self):
        return []

@contextlib.asynccontextmanager
async def open_world(*, runner_cmd, hermes, seed, **options):
    yield World()
    Path(f"closed-{options['name']}").write_text("")  # the case is over, its world closed
'''

INTERRUPTED = '''
import asyncio
from pathlib import Path
from conformance.marks import case
from conformance.portal import Portal

@case("GEN-001", name="waits")
async def test_waits_for_the_interrupt(world):
    Path("waiting").write_text("")
    await asyncio.Event().wait()

@case("GEN-002")
def test_a_synchronous_case_in_a_portal_call(case_seed):
    with Portal() as portal:
        Path("sync-waiting").write_text("")
        portal.call(asyncio.sleep, 600)

@case("DED-001", name="d1")
async def test_ends_before_the_interrupt(world):
    assert True

@case("DED-002", name="d2")
async def test_ends_before_the_interrupt_too(world):
    assert True
'''


def test_an_interrupt_keeps_the_cases_that_ended_and_ends_a_synchronous_one(
        pytester: pytest.Pytester) -> None:
    """Ctrl-C while pytest waits for the first case of the order: the cases that already ended
    on their lanes are reported (pass), not thrown away; the one waited for and a synchronous
    case stuck in a portal call are not judged, and the synchronous case's thread is ended at
    once (``portal.stop_calls``) instead of holding the interpreter's exit for 600 s."""
    make_project(pytester, INTERRUPTED)
    pytester.makepyfile(laneworld=INTERRUPTED_WORLD)
    costs = {"GEN-001": 10.0, "GEN-002": 9.0, "DED-001": 1.0, "DED-002": 1.0}
    pytester.makefile(".json", durations=json.dumps({"profiles": {"all": costs}}))
    args = engine_args("--conformance-lanes", "4", "--conformance-durations", "durations.json",
                       "--conformance-out", "out", world="laneworld:open_world")
    paths = [str(pytester.path), str(ROOT), os.environ.get("PYTHONPATH", "")]  # this checkout
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in paths if p)}
    proc = subprocess.Popen([sys.executable, "-m", "pytest", *args], cwd=pytester.path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        want = [pytester.path / n for n in ("waiting", "sync-waiting", "closed-d1", "closed-d2")]
        deadline = time.monotonic() + 60
        while not all(p.exists() for p in want):
            assert proc.poll() is None and time.monotonic() < deadline, proc.stdout and proc.stdout.read()
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        out = proc.communicate(timeout=60)[0]  # the portal call would hold the exit 600 s
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == pytest.ExitCode.INTERRUPTED, out
    doc = json.loads((pytester.path / "out" / "results.json").read_text())
    # (a plain session records what it judged; certify pads the rest with not-run: unrun.py)
    assert {c["id"]: c["status"] for c in doc["cases"]} == {"DED-001": "pass", "DED-002": "pass"}, out
