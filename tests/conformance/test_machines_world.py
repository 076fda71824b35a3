"""Machines and matrix cells over real sockets against the reference runner; and the failure
path: a violation fails the run with its minimal witness, the seed, the replay and the steps."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest
from hypothesis.stateful import rule

from conformance import hypothesis_profiles
from conformance.faults_matrix import CELLS, run_cell
from conformance.machines import actions
from conformance.machines.base import WorldMachine
from conformance.machines.families import DedupeMachine
from conformance.machines.rig import Rig
from conformance.machines.run import MachineFailed, run_machine
from conformance.reference_cmd import REFERENCE_RUNNER_CMD

REF = REFERENCE_RUNNER_CMD


def test_a_machine_run_passes_and_counts_steps() -> None:
    stats = run_machine(DedupeMachine, REF, seed=7, replay="REPLAY")
    assert stats["examples"] >= 1 and stats["steps"] >= stats["examples"]
    assert stats["seed"] == 7 and stats["profile"] == "ci"


class Ghost(WorldMachine):
    """Records a kill of a ghost instance at ``after_started`` for a command, then runs it: to
    the checker, a started command executed again after a restart (INV-7)."""

    family: ClassVar[str] = "test"

    @rule()
    def run_after_ghost_kill(self) -> None:
        cid = actions.new_id()
        self.rig.note("kill", instance="ghost", command_id=cid, reason="after_started")
        self.call(lambda: actions.http(self.rig, command_id=cid))


def test_a_violation_fails_with_witness_seed_replay_and_steps(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(hypothesis_profiles.ENV, "smoke")
    with pytest.raises(MachineFailed) as info:
        run_machine(Ghost, REF, seed=11, replay="pytest --conformance-seed 11")
    v = info.value.violation
    assert v is not None and v.invariant_id == "INV-7"
    assert v.witness[0].kind == "kill" and v.witness[-1].kind in ("effect", "result")
    assert v.seqs == sorted(v.seqs) and len(v.seqs) == 2
    text = str(info.value)
    assert "INV-7 violated" in text and "seed: 11" in text and "pytest --conformance-seed 11" in text
    assert "state.run_after_ghost_kill()" in capsys.readouterr().out + text


def test_matrix_cells_on_one_rig() -> None:
    picked = [c for c in CELLS if c.id in {"kill-http-after_started", "route-http-result:drop",
                                          "deadline-http-queued"}]
    with Rig(REF) as rig:
        for cell in picked:
            assert run_cell(rig, cell)["cell"] == cell.id
    assert rig.stats.restarts == 1


def test_the_deadline_row_leaves_nothing_held() -> None:
    """FLT-004's cells, twice on one rig: each ends with the runner's poll parked again and no
    request still held (a poll left held for an hour of server clock starved every later cell)."""
    from conformance.faults_matrix import cells

    with Rig(REF) as rig:
        w = rig.world
        for cell in cells("deadline") * 2:
            run_cell(rig, cell)
            assert rig.call(lambda: w.cp.poll_held(w.runner_id, timeout=5.0)) is not None

            def held() -> list[int]:  # unanswered delayed requests, but the poll parked now
                polls = [ex.seq for ex in w.cp.history.entries if ex.route == "poll"]
                return [ex.seq for ex in w.cp.history.entries
                        if ex.fault == "delay" and ex.status is None and ex.seq != polls[-1]]

            assert rig.portal.call_sync(held) == [], cell.id


def test_a_kept_rig_catches_up_with_the_wall_without_the_watchdog() -> None:
    """A kept rig's server clock stood still while it was kept: catching up by minutes must not
    take the runner offline (one big ``advance`` would: the watchdog sees no poll meanwhile)."""
    from conformance.kept_worlds import Pool
    from conformance.machines import kept

    pool = Pool()
    rig = kept.borrow(pool, REF, {})
    try:
        w = rig.world
        epoch = w.cp.epoch(w.runner_id)
        rig.runner_offset = 200.0  # as if the rig had sat kept for 200 s (the runner's clock)
        rig.call(rig.catch_up)
        assert w.clock is not None and w.clock.now() >= __import__("time").time() + 199
        assert w.cp.epoch(w.runner_id) == epoch and w.cp.is_online(w.runner_id)
        rig.runner_offset = 0.0
    finally:
        rig.close()
        pool.close_rigs()


def test_a_lag_within_the_watchdogs_room_is_caught_up_in_one_move() -> None:
    """A runner just seen can take the whole lag at once: no poll is woken for it. (Stepping
    instead cost a runner that pauses seconds between polls as much lag per step as the step
    removed, and the catch-up ran out its bound.)"""
    import time

    with Rig(REF) as rig:
        w = rig.world
        rig.call(lambda: w.cp.poll_held(w.runner_id, timeout=10.0))  # just seen
        waited: list[object] = []
        held = w.cp.poll_held

        def counted(*args: Any, **kw: Any) -> Any:  # a step waits for a parked poll
            waited.append(args)
            return held(*args, **kw)

        w.cp.poll_held = counted  # type: ignore[method-assign,assignment]
        rig.runner_offset = 8.0  # within offline_after - watchdog_tick of the runner's last poll
        rig.call(rig.catch_up)
        w.cp.poll_held = held  # type: ignore[method-assign]
        assert w.clock is not None and w.clock.now() >= time.time() + 7.5
        assert waited == []
        rig.runner_offset = 0.0


def test_a_rig_kept_past_twice_offline_after_is_replaced() -> None:
    from conformance.kept_worlds import Pool
    from conformance.machines import kept

    pool = Pool()
    rig = kept.borrow(pool, REF, {})
    rig.runner_offset = 3 * rig.world.timings.offline_after  # as if kept that long
    kept.give_back(pool, rig, passed=True)
    try:
        again = kept.borrow(pool, REF, {})
        assert again is not rig and not rig.portal.running
        again.close()
    finally:
        pool.close_rigs()
