"""PROP-001…007: one Hypothesis state machine per family over a real world, judged by the
history checker; the run's figures are attached to the case. Families with the same world
options run on one kept world (``machines.shared``: one runner start-up instead of one per
family), closed when the pytest session ends; a failed family closes it."""

from __future__ import annotations

import pytest
from hypothesis.errors import FlakyStrategyDefinition

from conformance.judge import attach
from conformance.machines import shared
from conformance.machines.families import MACHINES
from conformance.machines.run import MachineFailed, run_machine
from conformance.marks import case, long_case
from conformance.rows.properties import MACHINE_OF
from conformance.verdict import CaseFailed, Unjudged


def _replay(request: pytest.FixtureRequest, case_id: str, seed: int) -> str:
    plugin = request.config.pluginmanager.getplugin("conformance-session")
    return plugin.replay(case_id) if plugin is not None else f"--conformance-seed {seed}"


def _run(request: pytest.FixtureRequest, case_id: str, runner_cmd: str, seed: int) -> None:
    machine = MACHINES[MACHINE_OF[case_id]]
    replay = _replay(request, case_id, seed)
    print(f"{case_id}: {machine.family}, seed {seed}; replay: {replay}")
    if not getattr(request.config, "_conformance_rigs_kept", False):
        request.config._conformance_rigs_kept = True  # type: ignore[attr-defined]
        request.config.add_cleanup(shared.close_kept)
    try:
        stats = run_machine(machine, runner_cmd, seed=seed, replay=replay, share=True,
                            key=case_id)
    except MachineFailed as failed:
        attach(request.node, **failed.stats)
        v = failed.violation
        if v is None and isinstance(failed.__cause__, FlakyStrategyDefinition):
            # the machine drew differently on the same choices (a rule's draws followed the
            # world's timing): the harness could not judge, the runner is not at fault
            raise Unjudged("error", f"harness: {machine.family}: {failed.__cause__}"[:600]) \
                from None
        witness = [str(x) for x in str(failed).splitlines()]
        raise CaseFailed(f"no violation of any invariant ({machine.family})",
                         f"{v.invariant_id} violated: {v.sentence}" if v else str(failed)[:300],
                         witness) from None
    attach(request.node, **stats)


@case("PROP-001")
def test_permission_machine(request: pytest.FixtureRequest, runner_cmd: str, case_seed: int) -> None:
    _run(request, "PROP-001", runner_cmd, case_seed)


@case("PROP-002")
def test_dedupe_machine(request: pytest.FixtureRequest, runner_cmd: str, case_seed: int) -> None:
    _run(request, "PROP-002", runner_cmd, case_seed)


@case("PROP-003")
@long_case
def test_receipts_machine(request: pytest.FixtureRequest, runner_cmd: str, case_seed: int) -> None:
    _run(request, "PROP-003", runner_cmd, case_seed)


@case("PROP-004")
@long_case
def test_generations_machine(request: pytest.FixtureRequest, runner_cmd: str,
                             case_seed: int) -> None:
    _run(request, "PROP-004", runner_cmd, case_seed)


@case("PROP-005")
@long_case
def test_reconnection_machine(request: pytest.FixtureRequest, runner_cmd: str,
                              case_seed: int) -> None:
    _run(request, "PROP-005", runner_cmd, case_seed)


@case("PROP-006")
def test_cancel_races_machine(request: pytest.FixtureRequest, runner_cmd: str,
                              case_seed: int) -> None:
    _run(request, "PROP-006", runner_cmd, case_seed)


@case("PROP-007")
def test_isolation_machine(request: pytest.FixtureRequest, runner_cmd: str, case_seed: int) -> None:
    _run(request, "PROP-007", runner_cmd, case_seed)
