"""Each positive control's patch is really in effect: its seams resolve, applying them changes
the behaviour its probe looks at (a vacuous control would prove nothing), and undoing them
restores the reference behaviour exactly. In-process and fast; no conformance case runs."""
from __future__ import annotations

import pytest

from negative_controls import seams
from positive_controls.control import undo
from positive_controls.registry import COMPOSITES, CONTROLS, expand
from tests.positive_controls import pc_probes_slow  # noqa: F401 - registers its probes
from tests.positive_controls.pc_probes import PROBES

NAMES = [c.name for c in CONTROLS]


def test_every_control_has_a_probe_and_every_probe_a_control() -> None:
    assert sorted(PROBES) == sorted(NAMES)


@pytest.mark.parametrize("control", CONTROLS, ids=NAMES)
def test_probe_sees_the_choice_only_with_the_patch(control) -> None:
    before = [seams.resolve(p.seam) for p in control.patches]
    check = PROBES[control.name]
    assert check() is False, f"{control.name}: the reference runner already behaves so"
    applied = control.apply()
    try:
        for owner, name, original in before:
            assert vars(owner)[name] is not original
        assert check() is True, f"{control.name}: the patched seam changes nothing"
    finally:
        undo(applied)
    for owner, name, original in before:
        assert vars(owner)[name] is original
    assert check() is False, f"{control.name}: undo left the choice in place"


@pytest.mark.parametrize("composite", sorted(COMPOSITES))
def test_a_composite_shows_every_member(composite: str) -> None:
    """Rows applied together compose (each wraps what the seam holds): every member's probe
    still sees its choice, so the CI composite certifies every row at once."""
    rows = expand(composite)
    applied = [a for r in rows for a in r.apply()]
    try:
        quiet = [r.name for r in rows if PROBES[r.name]() is not True]
    finally:
        undo(applied)
    assert quiet == []
    assert all(PROBES[r.name]() is False for r in rows)
