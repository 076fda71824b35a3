"""A second attempt for the cases the harness could not judge (``certify --retries N``).

Rules:
- Only a case the harness could not judge is run again: status ``timeout`` or ``error``
  (:data:`UNJUDGED`; a bound of the harness ran out, or the harness itself failed). A ``fail``
  is a judgement on the runner and is never retried; nor is ``not-run`` (an interrupted run, a
  missing program) or anything else.
- The cases to retry run again together in a session of their own, on the same seed (a case's
  seed, its scripted choices and its replay line stay what they were), on fresh worlds of their
  own (none kept from the first session), at most ``jobs`` workers; up to ``retries`` times,
  each round taking only the cases still unjudged.
- Not when many are unjudged: more than :func:`most` of the run's cases (a tenth, at least
  three) says the runner or the machine is not working at all (a runner that never comes
  online times out every case); running them all again would only double the wait.
- The last attempt's record stands: a case that passes on a retry passes, one that fails
  fails, one still unjudged stays unjudged. Every earlier attempt is kept in the record
  (``data.attempts``: status, detail and duration, the first first), so a case judged only on a
  retry is visible in results.json, the report and the summary — a runner that hangs now and
  then shows there, and ``--retries 0`` makes the first attempt final.
- The JUnit file of the run gets the last attempt's ``testcase`` of each retried case in place
  of the first's (:func:`conformance.junit.replace_cases`).

Why: a timeout of the harness's own bound on a machine busy with other work says nothing about
the runner (the fairness review's point 9, "re-run before calling anything flaky or failed";
testharness' ``known_intermittent``). Sans-IO: :func:`unjudged` picks, :func:`fold` joins; the
session is run by the caller (``conformance.certify``).
"""

from __future__ import annotations

import dataclasses

from .results import CaseResult, RunResults

#: the statuses of a case the harness could not judge
UNJUDGED = frozenset({"timeout", "error"})
#: ``certify --retries`` when not given
DEFAULT_RETRIES = 1


def most(cases: int) -> int:
    """How many unjudged cases of a run of ``cases`` are run again at most."""
    return max(3, cases // 10)


def unjudged(results: RunResults) -> list[str]:
    """The IDs of the cases of ``results`` the harness could not judge, in ID order."""
    return sorted(c.id for c in results.cases if c.status in UNJUDGED)


def _attempt(case: CaseResult) -> dict[str, object]:
    return {"status": case.status, "detail": case.detail[:600], "duration": case.duration}


def fold(first: RunResults, again: RunResults) -> RunResults:
    """``first`` with each case that ``again`` recorded replaced by that later record, which
    carries the earlier attempts in ``data.attempts`` (the first first)."""
    later = {c.id: c for c in again.cases}
    cases = []
    for case in first.cases:
        new = later.get(case.id)
        if new is None:
            cases.append(case)
            continue
        attempts = [*case.data.get("attempts", []), _attempt(case)]
        cases.append(dataclasses.replace(new, data={**new.data, "attempts": attempts}))
    return dataclasses.replace(first, cases=cases, duration=first.duration + again.duration)


def retried(results: RunResults) -> list[CaseResult]:
    """The cases of ``results`` judged after more than one attempt, in ID order."""
    return sorted((c for c in results.cases if c.data.get("attempts")), key=lambda c: c.id)


def summary_line(results: RunResults) -> str | None:
    """One line for the terminal naming the cases run again and how each ended, or None."""
    cases = retried(results)
    if not cases:
        return None
    parts = [f"{c.id} {' → '.join([*(a['status'] for a in c.data['attempts']), c.status])}"
             for c in cases]
    return (f"run again (the harness could not judge the first attempt): {len(cases)} case(s): "
            + ", ".join(parts))
