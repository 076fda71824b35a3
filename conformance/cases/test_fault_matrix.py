"""FLT-001…005: the fault matrix, every cell enumerated.

Rules:
- A row's first lane runs on the kept rig (the worker's pool, ``machines.kept``: one world for
  the rows and the property families of the same options; a row with a failed or unjudged cell closes it);
  a row of several lanes (``faults_matrix.LANES``) runs its other lanes at the same time, each
  on a world of its own opened for the row and closed after it (``faults_matrix.run_row``).
- In a soak round (``--conformance-soak``) a row runs its cells in an order drawn from the case
  seed, so each round meets every cell after other ones; each lane keeps that order.
- The cells are reported in the order they were dealt from, whatever lane ran them: a failed
  cell is the runner's (``CaseFailed``), a cell the harness could not judge is ``Unjudged``.
"""

from __future__ import annotations

import random

import pytest

from conformance.casefixtures import pool_of
from conformance.faults_matrix import Cell, CellFailed, cells, lanes, run_row
from conformance.judge import attach, classify
from conformance.machines import kept
from conformance.marks import case, long_case
from conformance.results import combine
from conformance.rows.faults import ROW_OF
from conformance.verdict import CaseFailed, Unjudged
from conformance.witness import note_line, text_lines


def _order(request: pytest.FixtureRequest, row: str) -> list[Cell]:
    order = cells(row)
    if request.config.getoption("conformance_soak", False):
        random.Random(request.getfixturevalue("case_seed")).shuffle(order)
    return order


def _run(request: pytest.FixtureRequest, case_id: str, runner_cmd: str) -> None:
    plugin = request.config.pluginmanager.getplugin("conformance-session")
    replay = plugin.replay(case_id) if plugin is not None else ""
    row = ROW_OF[case_id]
    done: list[str] = []
    failed: list[tuple[str, str, str]] = []   # (cell, why, status): the runner's fault
    unjudged: list[tuple[str, str, str]] = []  # a cell the harness could not judge
    pool = pool_of(request.config)
    rig = kept.borrow(pool, runner_cmd, {})  # the kept world (one runner start-up for the rows)
    rig.new_run()
    passed = False
    try:
        run = run_row(rig, _order(request, row), replay=replay)
        for cell, outcome in run.outcomes:
            if not isinstance(outcome, Exception):
                done.append(cell.id)
            elif isinstance(outcome, CellFailed):
                failed.append((cell.id, str(outcome), "fail"))
            else:  # judged here: fail, error or timeout
                status = classify(outcome)
                (failed if status == "fail" else unjudged).append(
                    (cell.id, f"{type(outcome).__name__}: {outcome}", status))
        passed = not failed and not unjudged
    finally:
        rig.lap()
        kept.give_back(pool, rig, passed=passed)
    attach(request.node, cells=len(done) + len(failed) + len(unjudged), passed=len(done),
           lanes=lanes(row), restarts=run.total("restarts"),
           server_restarts=run.total("server_restarts"), seconds=round(rig.stats.seconds, 3))
    total = len(done) + len(failed) + len(unjudged)
    if failed:
        raise CaseFailed(f"every {row} cell holds ({total} cells)",
                         f"{len(failed)} cell(s) failed: {', '.join(c for c, _, _ in failed)}"
                         f" (first: {failed[0][1][:160]})",
                         [ln for c, m, _ in failed for ln in text_lines(f"cell {c}: {m}")]
                         + [ln for c, m, st in unjudged
                            for ln in text_lines(f"cell {c} not judged ({st}): {m}")]
                         + [note_line("harness", f"replay: {replay}")])
    if unjudged:
        raise Unjudged(combine(st for _, _, st in unjudged),
                       f"{len(unjudged)} of {total} {row} cell(s) not judged: "
                       + "; ".join(f"{c}: {m}" for c, m, _ in unjudged))


@case("FLT-001")
@long_case
def test_kill_at_each_step(request: pytest.FixtureRequest, runner_cmd: str) -> None:
    """The kill row, judged by INV-1, INV-6 and INV-7 (``rows.faults.JUDGED_BY``).

    fails when: the ledger is not durable (ledger-in-memory), or a started row runs again after
    the kill (rerun-started-rows)."""
    _run(request, "FLT-001", runner_cmd)


@case("FLT-002")
@long_case
def test_server_restart_at_each_step(request: pytest.FixtureRequest, runner_cmd: str) -> None:
    """The server-restart row, judged by INV-1, INV-5 and INV-11 (``rows.faults.JUDGED_BY``).

    fails when: a command runs twice across the restart (INV-1), or a result of the old epoch
    or of a fenced instance is accepted (INV-5, INV-11). No negative control is proven against
    it yet: stale-epoch-header makes it time out, not fail."""
    _run(request, "FLT-002", runner_cmd)


@case("FLT-003")
def test_route_faults(request: pytest.FixtureRequest, runner_cmd: str) -> None:
    """The route row, judged by INV-1 and INV-6 (``rows.faults.JUDGED_BY``).

    fails when: a failed result post loses the receipt, so the redelivery runs again
    (result-lost-on-5xx)."""
    _run(request, "FLT-003", runner_cmd)


@case("FLT-004")
def test_deadlines_at_each_step(request: pytest.FixtureRequest, runner_cmd: str) -> None:
    """The deadline row, judged by its cells' own check (``rows.faults.JUDGED_BY``).

    fails when: a command is accepted after its deadline (queued, held at admit or at its
    result). No negative control is proven against it: no-deadline-check passes it (the
    control plane refuses the late result itself)."""
    _run(request, "FLT-004", runner_cmd)


@case("FLT-005")
def test_one_hour_retirement(request: pytest.FixtureRequest, runner_cmd: str) -> None:
    """The retirement row, judged by INV-7 (``rows.faults.JUDGED_BY``).

    fails when: a receipt retired after an hour is deleted, so its replay runs again instead
    of being answered runner_command_uncertain (retire-deletes-rows)."""
    _run(request, "FLT-005", runner_cmd)
