"""certify's default ``-j``: two workers per core, capped by the selection's size."""
from __future__ import annotations

import fnmatch

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


def test_another_suite_is_not_capped() -> None:
    args = parser().parse_args(["--suite", "tests.conformance.engine_sample", "--cases", "X-1"])
    assert default_jobs(args, cores=3) == 3 * WORKERS_PER_CORE
