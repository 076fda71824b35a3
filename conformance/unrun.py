"""Selected cases a run has no record of are ``not-run``: a run never passes by leaving a case
out (sans-IO).

Rules:
- ``certify`` pads its run with a ``not-run`` record for every case of its selection (the
  profile's rows matched by ``--cases``; a shard's own cases) that the session did not record:
  the session was interrupted (Ctrl-C, SIGINT), stopped at the first failing MUST (``-x``), or a
  worker broke. ``not-run`` makes the verdict INCOMPLETE (or leaves FAIL as it is), never PASS.
- ``merge`` pads each shard the same way with the cases assigned to it.
- A record says why in its ``detail``; the level, family, feature, section and requirement come
  from the catalogue row (a row the catalogue does not know is a MUST of family ``unknown``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from .catalogue import Catalogue
from .results import CaseResult, RunResults
from .verdict import NOT_RUN

__all__ = ["NOT_RUN", "not_run", "padded"]


def not_run(ids: Iterable[str], catalogue: Catalogue, detail: str) -> list[CaseResult]:
    """A ``not-run`` record for each of ``ids`` (sorted), saying ``detail``."""
    out = []
    for cid in sorted(set(ids)):
        row = catalogue.get(cid)
        out.append(CaseResult(
            id=cid, level=row.level if row else "MUST", family=row.family if row else "unknown",
            feature=row.feature if row else "core", section=row.section if row else "",
            requirement=row.requirement if row else "", status=NOT_RUN, detail=detail))
    return out


def padded(results: RunResults, expected: Iterable[str], catalogue: Catalogue,
           detail: str) -> tuple[RunResults, int]:
    """``results`` with a ``not-run`` record for each ``expected`` case it has none of, in ID
    order, and how many were added."""
    have = {c.id for c in results.cases}
    extra = not_run(set(expected) - have, catalogue, detail)
    if not extra:
        return results, 0
    cases = sorted([*results.cases, *extra], key=lambda c: c.id)
    return dataclasses.replace(results, cases=cases), len(extra)
