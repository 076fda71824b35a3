"""How a case's phases become its verdict, on the process that runs it.

Rules of this module:
- A case item accumulates a :class:`CaseState` over setup, call and teardown: one phase status
  each (``pass``, ``fail``, ``not-applicable``, ``expected-fail``), the first
  :class:`~conformance.verdict.CaseFailed`'s expected/actual/witness, the world, the transcript.
- A skip is *not-applicable* (``not-run`` when its reason says so). A failing phase gets the
  status :data:`CLASSIFY` gives its exception (looked up along the exception's MRO; a wrapper
  (``judged_by_cause``) is judged by its cause): an expectation about the runner or the runner's
  death is ``fail``, a bounded wait of the harness that ran out is ``timeout``, anything else the
  harness raised is ``error``. A ``fail`` of a baselined case becomes ``expected-fail`` (shown
  as xfail); a baselined case that errs keeps ``error``/``timeout``.
- Every report leaving the process is redacted with the world's secrets (its long text and
  its captured sections).
- :func:`merge` folds the records of one case ID (a parametrized case) into one: worst wins.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import pytest

from .adapter import RunnerExited
from .catalogue import Case
from .process import MissingProgram, ProcessExited
from .results import CaseResult, combine, redact
from .secrets import Secrets
from .transcripts import digest
from .verdict import NOT_RUN, CaseFailed, Unjudged


def load_object(spec: str) -> Any:
    module, _, attr = spec.partition(":")
    obj: Any = importlib.import_module(module)
    for part in attr.split(".") if attr else ():
        obj = getattr(obj, part)
    return obj


@dataclass
class CaseState:
    """What one case item accumulates on the process that runs it."""

    case_id: str
    row: Case | None
    options: dict[str, Any]
    baselined: bool
    seed: int
    phases: list[str] = field(default_factory=list)
    expected: str = ""
    actual: str = ""
    witness: list[str] = field(default_factory=list)
    detail: str = ""
    duration: float = 0.0
    world: Any = None
    transcript: list[Any] = field(default_factory=list)  # JSON objects (a foreign world: text)
    data: dict[str, Any] = field(default_factory=dict)
    #: the programs the case used, counted on its lane (:mod:`conformance.lanes`); None: the
    #: process's count (:func:`conformance.environment.take_uses`)
    uses: set[str] | None = None

    def secrets(self) -> Secrets:
        """The world's secrets as one registry (a foreign world's plain values included)."""
        return Secrets.of(getattr(self.world, "secrets", None) or ())


STATE = pytest.StashKey[CaseState]()


def require_row(state: CaseState, nodeid: str) -> None:
    """A case without a catalogue row fails at setup."""
    if state.row is None:
        raise CaseFailed(f"a catalogue row for {state.case_id}",
                         f"{state.case_id} is not in the catalogue ({nodeid})")


def attach(node: pytest.Item, **data: Any) -> None:
    """Attach figures to the case result of ``node`` (``results.json`` ``data``, JUnit
    properties); a no-op for an ordinary test."""
    state = node.stash.get(STATE, None)
    if state is not None:
        state.data.update(data)
    node.user_properties.extend((f"data.{k}", str(v)) for k, v in data.items())


#: exception type -> the case status it gives; the first class of the exception's MRO found
#: here wins (so a subclass can be listed before its base).
CLASSIFY: dict[type[BaseException], str] = {
    CaseFailed: "fail",      # expected vs actual with its witness
    Unjudged: "error",       # a case that says it could not judge (its .status is used)
    RunnerExited: "fail",    # the runner died while the harness waited on it
    ProcessExited: "fail",   # the same, seen by a line wait
    MissingProgram: "error",  # a program the harness needs is not installed
    TimeoutError: "timeout",  # a bounded wait of the harness ran out (no runner fault shown)
    AssertionError: "fail",  # invariant violations, machine/cell failures, a plain assert
    pytest.fail.Exception: "fail",  # pytest.fail() (pytest-timeout's is told apart below)
    OSError: "error",        # no free port, a file of the harness
    BaseException: "error",  # any other exception of the harness, its own bugs included
}
#: a wrapper that carries the real exception as its ``__cause__`` says so with this class
#: attribute (machines.run's MachineFailed, PinFailed): it is judged by the cause when the cause
#: is not itself an expectation about the runner
WRAPS_CAUSE = "judged_by_cause"
#: pytest-timeout fails a case that overran its per-case bound with a message that starts so:
#: "Timeout >180.0s" before 2.4, "Timeout (>180.0s) from pytest-timeout." since (a lane's own
#: bound, conformance/lanes.py, writes the first form)
PYTEST_TIMEOUT = re.compile(r"Timeout \(?>\d")


def classify(exc: BaseException | None) -> str:
    """The status of a failing phase whose exception is ``exc``."""
    if exc is None:
        return "fail"
    if isinstance(exc, Unjudged):
        return exc.status
    if getattr(type(exc), WRAPS_CAUSE, False) and exc.__cause__ is not None:
        cause = classify(exc.__cause__)
        if cause != "fail":
            return cause
    if isinstance(exc, BaseExceptionGroup):
        return combine(classify(e) for e in exc.exceptions)
    if isinstance(exc, pytest.fail.Exception) and PYTEST_TIMEOUT.match(str(exc.msg or "")):
        return "timeout"
    return next(CLASSIFY[k] for k in type(exc).__mro__ if k in CLASSIFY)


def judge_phase(state: CaseState, rep: pytest.TestReport, call: pytest.CallInfo[None]) -> None:
    state.duration += rep.duration
    secrets = state.secrets()
    exc = call.excinfo.value if call.excinfo is not None else None
    if isinstance(exc, CaseFailed) and not state.expected and not state.actual:
        state.expected, state.actual, state.witness = exc.expected, exc.actual, list(exc.witness)
    if rep.skipped and not hasattr(rep, "wasxfail"):
        longrepr = rep.longrepr
        state.detail = str(longrepr[2]) if isinstance(longrepr, tuple) else str(longrepr)
        state.phases.append(NOT_RUN if NOT_RUN + ":" in state.detail else "not-applicable")
    elif rep.failed:
        status = classify(exc)
        if not state.detail and not isinstance(exc, CaseFailed):
            state.detail = _first_lines(exc) if exc is not None else str(rep.longrepr)[:2000]
        if isinstance(exc, CaseFailed):
            row = state.row
            head = f"{state.case_id} [{row.level}] {row.requirement}\n" if row else ""
            where = rep.location
            rep.longrepr = f"{head}{exc.render()}\n({where[0]}:{(where[1] or 0) + 1})"
        if state.baselined and status == "fail":
            rep.outcome = "skipped"
            rep.wasxfail = f"baseline: {state.case_id}"  # type: ignore[attr-defined]
            state.phases.append("expected-fail")
        else:
            state.phases.append(status)
    else:
        state.phases.append("pass")
    if secrets:
        if rep.longrepr is not None and not isinstance(rep.longrepr, tuple):
            text = str(rep.longrepr)
            if any(s in text for s in secrets):
                rep.longrepr = redact(text, secrets)
        rep.sections = [(k, redact(v, secrets)) for k, v in rep.sections]


def _first_lines(exc: BaseException, limit: int = 12) -> str:
    text = f"{type(exc).__name__}: {exc}" if not isinstance(exc, CaseFailed) else exc.render()
    return "\n".join(text.splitlines()[:limit])


def merge(records: Iterable[CaseResult]) -> list[CaseResult]:
    """One record per case ID (a parametrized case has several items): the worst status wins."""
    by_id: dict[str, list[CaseResult]] = {}
    for r in records:
        by_id.setdefault(r.id, []).append(r)
    out: list[CaseResult] = []
    for case_id in sorted(by_id):
        group = by_id[case_id]
        status = combine(r.status for r in group)
        lead = next(r for r in group if r.status == status)
        merged = CaseResult(**lead.__dict__)
        merged.duration = round(sum(r.duration for r in group), 6)
        if len(group) > 1:
            merged.nodeid = ", ".join(r.nodeid for r in group)
            merged.transcript = [t for r in group for t in r.transcript]
            digests = [r.transcript_digest for r in group if r.transcript_digest]
            merged.transcript_digest = {
                "items": sum(d["items"] for d in digests),
                "sha256": digest([d["sha256"] for d in digests])["sha256"]} if digests else None
        out.append(merged)
    return out
