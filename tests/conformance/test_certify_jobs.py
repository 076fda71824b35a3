"""certify's default ``-j`` and ``--lanes``: one process with three lanes per core on up to two
cores; else two workers per core, capped by the selection's size, two lanes each."""
from __future__ import annotations

import fnmatch
from pathlib import Path

import pytest

from conformance.catalogue import CATALOGUE
from conformance.certify import (
    CASES_PER_WORKER,
    ONE_PROCESS_CORES,
    WORKERS_PER_CORE,
    default_jobs,
    parser,
)
from conformance.lanes import LANES_PER_CORE, WORKER_LANES, default_lanes


def test_two_workers_per_core_for_a_whole_profile() -> None:
    args = parser().parse_args(["--profile", "core"])
    assert default_jobs(args, cores=4) == 4 * WORKERS_PER_CORE
    assert default_lanes(4 * WORKERS_PER_CORE, cores=4) == WORKER_LANES


def test_one_process_with_lanes_on_a_small_machine() -> None:
    args = parser().parse_args(["--profile", "core"])
    for cores in range(1, ONE_PROCESS_CORES + 1):
        assert default_jobs(args, cores=cores) == 1
        assert default_lanes(1, cores=cores) == LANES_PER_CORE * cores


def test_a_small_selection_gets_fewer_workers() -> None:
    assert default_jobs(parser().parse_args(["--cases", "DED-001"]), cores=4) == 1
    picked = [r for r in CATALOGUE.in_profile("core")
              if fnmatch.fnmatchcase(r.id, "DED-*") or fnmatch.fnmatchcase(r.id, "GEN-*")]
    args = parser().parse_args(["--cases", "DED-*,GEN-*"])
    assert default_jobs(args, cores=8) == min(8 * WORKERS_PER_CORE,
                                              len(picked) // CASES_PER_WORKER)


def test_another_catalogue_is_counted_and_an_unloadable_one_is_not_capped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    (tmp_path / "jobscat.py").write_text(
        "from conformance.catalogue import Case, Catalogue\n"
        "CAT = Catalogue([Case(f'GEN-{i:03}', 'MUST', 'A rule MUST hold.', '2.4', 'generations')"
        " for i in range(1, 14)])\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    args = parser().parse_args(["--suite", "x.py", "--catalogue", "jobscat:CAT"])
    assert default_jobs(args, cores=3) == 13 // CASES_PER_WORKER
    args = parser().parse_args(["--catalogue", "jobscat:CAT", "--cases", "GEN-001"])
    assert default_jobs(args, cores=3) == 1
    for spec in ("no_such_module_xyz:CAT", "jobscat:missing", "fnmatch:fnmatch"):
        args = parser().parse_args(["--catalogue", spec])
        assert default_jobs(args, cores=3) == 3 * WORKERS_PER_CORE


def test_a_suite_with_the_default_catalogue_is_capped_by_its_selection() -> None:
    args = parser().parse_args(["--suite", "tests.conformance.engine_sample", "--cases", "X-1"])
    assert default_jobs(args, cores=3) == 1
