"""certify's default ``-j``: two workers per core, capped by the selection's size."""
from __future__ import annotations

import fnmatch
from pathlib import Path

import pytest

from conformance.catalogue import CATALOGUE
from conformance.certify import CASES_PER_WORKER, WORKERS_PER_CORE, default_jobs, parser


def test_two_workers_per_core_for_a_whole_profile() -> None:
    args = parser().parse_args(["--profile", "core"])
    assert default_jobs(args, cores=2) == 2 * WORKERS_PER_CORE


def test_a_small_selection_gets_fewer_workers() -> None:
    assert default_jobs(parser().parse_args(["--cases", "DED-001"]), cores=2) == 1
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
