"""The table's rules: unique names, one resolvable seam per control, case IDs shaped like
catalogue IDs and reserved in the case plan's families, every family covered; and the
self-test's: only a ``fail`` catches a control."""
from __future__ import annotations

import dataclasses

import pytest

from conformance.catalogue import CATALOGUE
from negative_controls import seams
from negative_controls.control import FAMILIES, problems
from negative_controls.registry import BY_NAME, CONTROLS, MINIMUM, RegistryError, check
from negative_controls.verify import TIMEOUT_CATCHES, Outcome, Verdict

PREFIXES = {"WIR", "PERM", "SEC", "DED", "INC", "GEN", "REC", "CAN", "ISO", "CFG", "LIM", "TT",
            "PROP", "FLT", "HRM"}
CATALOGUED = set(CATALOGUE.ids())


def test_the_table_keeps_its_rules() -> None:
    check()
    assert len(CONTROLS) >= MINIMUM
    assert {c.family for c in CONTROLS} == set(FAMILIES)


@pytest.mark.parametrize("control", CONTROLS, ids=[c.name for c in CONTROLS])
def test_each_row(control) -> None:
    assert problems(control) == []
    seams.resolve(control.seam)   # raises for a seam that names nothing
    assert {c.split("-")[0] for c in control.cases} <= PREFIXES
    # A declared case the catalogue does not hold would leave the control unverified (the
    # self-test could only say "not written"): every one must exist.
    assert set(control.cases) <= CATALOGUED, sorted(set(control.cases) - CATALOGUED)


def test_a_broken_table_is_refused() -> None:
    row = CONTROLS[0]
    with pytest.raises(RegistryError, match="duplicate"):
        check((*CONTROLS, row))
    with pytest.raises(RegistryError, match="no catching case"):
        check((dataclasses.replace(row, cases=()), *CONTROLS[1:]))
    with pytest.raises(RegistryError, match="at least"):
        check(CONTROLS[:3])


def test_runner_ref_has_no_bug_switches() -> None:
    """The bugs live here, never in the reference runner: runner_ref does not know us."""
    from pathlib import Path

    import runner_ref
    root = Path(runner_ref.__file__).parent
    for path in root.rglob("*.py"):
        assert "negative_control" not in path.read_text(encoding="utf-8"), path


def test_only_a_fail_catches_a_control() -> None:
    """A declared case that ends ``timeout`` or ``error`` (the harness could not judge) leaves
    the control escaped; only ``fail`` (the runner failed with evidence) catches it."""
    v = Verdict("skip-admit", ("WIR-006", "WIR-007", "REC-005"))
    v.outcomes = {"WIR-006": Outcome("fail"), "WIR-007": Outcome("timeout"),
                  "REC-005": Outcome("error")}
    assert v.caught == ["WIR-006"]
    assert v.escaped == ["WIR-007", "REC-005"]


def test_timeout_catches_name_declared_cases() -> None:
    """The flagged debt (empty now) may only name a control's own declared cases."""
    assert all(case in BY_NAME[name].cases for name, case in TIMEOUT_CATCHES)
