"""Units of the property machines and the fault matrix: tables, profiles, rows (no sockets)."""

from __future__ import annotations

from hypothesis import settings
from hypothesis.stateful import RuleBasedStateMachine

from conformance import hypothesis_profiles
from conformance.catalogue import CATALOGUE
from conformance.checks.invariants import STARTED_POINTS, UNSTORED_POINTS
from conformance.faults_matrix import CELLS, ROUTE_FAULTS, ROUTES, cells
from conformance.machines import actions
from conformance.machines.families import MACHINES
from conformance.rows import faults, properties


def test_seven_families_one_machine_each_and_a_catalogued_must_case() -> None:
    assert len(MACHINES) == 7
    assert sorted(properties.MACHINE_OF.values()) == sorted(MACHINES)
    for cid in properties.MACHINE_OF:
        assert CATALOGUE[cid].level == "MUST"
    for cls in MACHINES.values():
        assert issubclass(cls, RuleBasedStateMachine) and cls.family
        rules = [n for n in dir(cls) if hasattr(getattr(cls, n), "hypothesis_stateful_rule")]
        assert len(rules) >= 2, cls


def test_matrix_is_enumerated_every_point_times_every_kind() -> None:
    kill = {(c.kind, c.point) for c in cells("kill")}
    expected = {(k, p) for k in actions.KINDS for p in actions.POINTS} - actions.UNREACHABLE
    assert kill == expected and len(kill) == 7 * 3 - len(actions.UNREACHABLE)
    assert {c.point for c in cells("route")} == {f"{r}:{f}" for r in ROUTES for f in ROUTE_FAULTS}
    assert len({c.id for c in CELLS}) == len(CELLS)
    assert set(faults.ROW_OF.values()) == {c.row for c in CELLS}
    for cid in faults.ROW_OF:
        assert CATALOGUE[cid].level == "MUST"


def test_kill_points_the_checker_knows() -> None:
    """Every point past the started row is one the checker treats as 'started written'."""
    past_started = set(actions.POINTS) - {"after_delivery"}
    assert past_started <= STARTED_POINTS
    assert UNSTORED_POINTS - {"admit_held"} <= set(actions.POINTS)
    for point, how in actions.KILL_POINTS.items():
        assert how.split(":")[0] in {"see", "hold", "pause"}, point


def test_machine_profiles_and_ci_is_the_default(monkeypatch) -> None:
    monkeypatch.delenv(hypothesis_profiles.ENV, raising=False)
    assert hypothesis_profiles.current() == "ci"
    for name, (examples, steps) in hypothesis_profiles.PROFILES.items():
        monkeypatch.setenv(hypothesis_profiles.ENV, name)
        s = hypothesis_profiles.machine_settings(1, "PROP-002")
        assert (s.max_examples, s.stateful_step_count) == (examples, steps)
        # never inherited from the loaded house profile (derandomized, no database)
        assert s.deadline is None and s.print_blob and not s.derandomize and s.database is None
    monkeypatch.setenv(hypothesis_profiles.ENV, "nonsense")
    assert hypothesis_profiles.current() == "ci"


def test_the_house_profile_is_loaded_by_the_root_conftest() -> None:
    assert settings.get_current_profile_name() in ("ci", "thorough")
    assert settings.get_profile("ci").derandomize and settings.get_profile("ci").database is None


def test_the_reported_failure_carries_its_own_violation() -> None:
    """A flaky or multiple failure (an exception group) or a pin's wrapped error gives the
    violation of the example it reports, not of whichever example failed last."""
    from conformance.checks.proof import Violation
    from conformance.machines.base import ViolationFound, violation_of

    first = Violation("INV-1", "at most one Hermes effect per command id", ())
    later = Violation("INV-6", "a redelivery gets the same answer", ())
    reported = ViolationFound("INV-1 violated", first)
    assert violation_of(reported) is first
    group = BaseExceptionGroup("flaky", [ValueError("other"), reported,
                                         ViolationFound("INV-6 violated", later)])
    assert violation_of(group) is first
    wrapped = AssertionError("pinned story failed")
    wrapped.__cause__ = reported
    assert violation_of(wrapped) is first
    assert violation_of(ValueError("no checker")) is None and violation_of(None) is None
