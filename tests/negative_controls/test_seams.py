"""Each control's patch is really in effect: its seam resolves, applying it changes the
behaviour its probe looks at, and undoing it restores the reference behaviour exactly.

These checks are in-process and fast; they do not depend on the conformance cases.
"""
from __future__ import annotations

import pytest

from negative_controls import seams
from negative_controls.registry import CONTROLS
from tests.negative_controls import (
    nc_probes_gateway,  # noqa: F401 - registers its probes
    nc_probes_ledger,  # noqa: F401 - registers its probes
    nc_probes_permission,  # noqa: F401 - registers its probes
    nc_probes_process,  # noqa: F401 - registers its probes
    nc_probes_reconnection,  # noqa: F401 - registers its probes
    nc_probes_teamtools,  # noqa: F401 - registers its probes
    nc_probes_wire,  # noqa: F401 - registers its probes
)
from tests.negative_controls.nc_probes import PROBES

NAMES = [c.name for c in CONTROLS]


def test_every_control_has_a_probe_and_every_probe_a_control() -> None:
    assert sorted(PROBES) == sorted(NAMES)


@pytest.mark.parametrize("control", CONTROLS, ids=NAMES)
def test_probe_sees_the_bug_only_with_the_patch(control) -> None:
    owner, name, original = seams.resolve(control.seam)
    check = PROBES[control.name]
    assert check() is False, f"{control.name}: the reference runner already shows the bug"
    applied = control.apply()
    try:
        assert vars(owner)[name] is not original
        assert check() is True, f"{control.name}: the patched seam does not show the bug"
    finally:
        applied.undo()
    assert vars(owner)[name] is original
    assert check() is False, f"{control.name}: undo left the bug in place"


def test_rebind_patches_every_importer() -> None:
    from runner_ref.teamtools import ids, listener
    before = (ids.opaque_id, listener.opaque_id)
    ctl = next(c for c in CONTROLS if c.name == "real-tool-ids")
    applied = ctl.apply()
    try:
        assert ids.opaque_id is listener.opaque_id is not before[0]
    finally:
        applied.undo()
    assert (ids.opaque_id, listener.opaque_id) == before


def test_a_seam_outside_runner_ref_is_refused() -> None:
    with pytest.raises(seams.SeamError):
        seams.resolve("os:getcwd")
    with pytest.raises(seams.SeamError):
        seams.resolve("runner_ref.poll_loop:no_such_thing")
