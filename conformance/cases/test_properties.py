"""PROP-001…007: one Hypothesis state machine per family over a real world, judged by the
history checker; the run's figures are attached to the case. Families with the same world
options run on one kept rig (the worker's pool, ``machines.kept``: one runner start-up instead
of one per family), closed when the pytest session ends; a failed family closes it."""

from __future__ import annotations

import pytest
from hypothesis.errors import FlakyStrategyDefinition

from conformance.casefixtures import pool_of
from conformance.judge import attach
from conformance.machines.families import MACHINES
from conformance.machines.run import MachineFailed, run_machine
from conformance.marks import case, long_case
from conformance.rows.properties import MACHINE_OF
from conformance.verdict import CaseFailed, Unjudged
from conformance.witness import text_lines


def _replay(request: pytest.FixtureRequest, case_id: str, seed: int) -> str:
    plugin = request.config.pluginmanager.getplugin("conformance-session")
    return plugin.replay(case_id) if plugin is not None else f"--conformance-seed {seed}"


def _run(request: pytest.FixtureRequest, case_id: str, runner_cmd: str, seed: int) -> None:
    machine = MACHINES[MACHINE_OF[case_id]]
    replay = _replay(request, case_id, seed)
    print(f"{case_id}: {machine.family}, seed {seed}; replay: {replay}")
    try:
        stats = run_machine(machine, runner_cmd, seed=seed, replay=replay, pool=pool_of(request.config),
                            key=case_id)
    except MachineFailed as failed:
        attach(request.node, **failed.stats)
        v = failed.violation
        if v is None and isinstance(failed.__cause__, FlakyStrategyDefinition):
            # the machine drew differently on the same choices (a rule's draws followed the
            # world's timing): the harness could not judge, the runner is not at fault
            raise Unjudged("error", f"harness: {machine.family}: {failed.__cause__}"[:600]) \
                from None
        witness = text_lines(str(failed))
        raise CaseFailed(f"no violation of any invariant ({machine.family})",
                         f"{v.invariant_id} violated: {v.sentence}" if v else str(failed)[:300],
                         witness) from None
    attach(request.node, **stats)


@case("PROP-001")
def test_permission_machine(request: pytest.FixtureRequest, runner_cmd: str, case_seed: int) -> None:
    """The permission machine, judged by INV-2 and INV-9 (``rows.properties.JUDGED_BY``).

    fails when: an effect needs no admit (skip-admit), or a profile-checked path ignores its
    profile (http-no-profile-check)."""
    _run(request, "PROP-001", runner_cmd, case_seed)


@case("PROP-002")
def test_dedupe_machine(request: pytest.FixtureRequest, runner_cmd: str, case_seed: int) -> None:
    """The dedupe machine, judged by INV-1, INV-6 and INV-10 (``rows.properties.JUDGED_BY``).

    fails when: the claim upserts its row (claim-upserts), dedupe ignores the payload
    (ignore-fingerprint), a redelivery in flight runs again (rerun-inflight-redelivery), or a
    refusal is not stored (refusals-not-stored)."""
    _run(request, "PROP-002", runner_cmd, case_seed)


@case("PROP-003")
@long_case
def test_receipts_machine(request: pytest.FixtureRequest, runner_cmd: str, case_seed: int) -> None:
    """The receipts machine, judged by INV-1, INV-6 and INV-7 (``rows.properties.JUDGED_BY``).

    fails when: the ledger is not durable (ledger-in-memory), a started row runs again after a
    kill (rerun-started-rows), a retired row is deleted (retire-deletes-rows), or a receipt is
    written after its result (write-behind-receipts)."""
    _run(request, "PROP-003", runner_cmd, case_seed)


@case("PROP-004")
@long_case
def test_generations_machine(request: pytest.FixtureRequest, runner_cmd: str,
                             case_seed: int) -> None:
    """The generations machine, judged by INV-5, INV-8 and INV-11
    (``rows.properties.JUDGED_BY``).

    fails when: channels or leases outlive a new epoch (keep-channels-on-new-epoch,
    keep-leases-on-new-epoch), or results carry the first epoch seen (stale-epoch-header)."""
    _run(request, "PROP-004", runner_cmd, case_seed)


@case("PROP-005")
@long_case
def test_reconnection_machine(request: pytest.FixtureRequest, runner_cmd: str,
                              case_seed: int) -> None:
    """The reconnection machine, judged by INV-1 and INV-6 (``rows.properties.JUDGED_BY``).

    fails when: a failed result post loses the receipt (result-lost-on-5xx)."""
    _run(request, "PROP-005", runner_cmd, case_seed)


@case("PROP-006")
def test_cancel_races_machine(request: pytest.FixtureRequest, runner_cmd: str,
                              case_seed: int) -> None:
    """The cancel-races machine, judged by INV-2, INV-3 and INV-8
    (``rows.properties.JUDGED_BY``).

    fails when: a closed channel or lease id is not tombstoned (no-tombstone,
    no-lease-tombstone), or an admit answered allowed: false is taken as granted
    (ignore-admit-false)."""
    _run(request, "PROP-006", runner_cmd, case_seed)


@case("PROP-007")
def test_isolation_machine(request: pytest.FixtureRequest, runner_cmd: str, case_seed: int) -> None:
    """The isolation machine, judged by INV-4 (``rows.properties.JUDGED_BY``).

    fails when: an event of a session is posted on a channel that does not own it (INV-4). No
    negative control is proven against it yet: forward-foreign-events passes it."""
    _run(request, "PROP-007", runner_cmd, case_seed)
