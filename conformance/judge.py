"""How a case's phases become its verdict, on the process that runs it.

Rules of this module:
- A case item accumulates a :class:`CaseState` over setup, call and teardown: one phase status
  each (``pass``, ``fail``, ``not-applicable``, ``expected-fail``), the first
  :class:`~conformance.verdict.CaseFailed`'s expected/actual/witness, the world, the transcript.
- A skip is *not-applicable*. A failure of a baselined case becomes ``expected-fail`` and is
  shown as xfail; a failure of any other case is ``fail``.
- Every report leaving the process is redacted with the world's secrets (its long text and
  its captured sections).
- :func:`merge` folds the records of one case ID (a parametrized case) into one: worst wins.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import pytest

from .catalogue import Case
from .results import CaseResult, combine, redact
from .secrets import Secrets
from .transcripts import digest
from .verdict import CaseFailed


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

    def secrets(self) -> Secrets:
        """The world's secrets as one registry (a foreign world's plain values included)."""
        return Secrets.of(getattr(self.world, "secrets", None) or ())


STATE = pytest.StashKey[CaseState]()


def attach(node: pytest.Item, **data: Any) -> None:
    """Attach figures to the case result of ``node`` (``results.json`` ``data``, JUnit
    properties); a no-op for an ordinary test."""
    state = node.stash.get(STATE, None)
    if state is not None:
        state.data.update(data)
    node.user_properties.extend((f"data.{k}", str(v)) for k, v in data.items())


def judge_phase(state: CaseState, rep: pytest.TestReport, call: pytest.CallInfo[None]) -> None:
    state.duration += rep.duration
    secrets = state.secrets()
    exc = call.excinfo.value if call.excinfo is not None else None
    if isinstance(exc, CaseFailed) and not state.expected and not state.actual:
        state.expected, state.actual, state.witness = exc.expected, exc.actual, list(exc.witness)
    if rep.skipped and not hasattr(rep, "wasxfail"):
        state.phases.append("not-applicable")
        longrepr = rep.longrepr
        state.detail = str(longrepr[2]) if isinstance(longrepr, tuple) else str(longrepr)
    elif rep.failed:
        if not state.detail and not isinstance(exc, CaseFailed):
            state.detail = _first_lines(exc) if exc is not None else str(rep.longrepr)[:2000]
        if isinstance(exc, CaseFailed):
            row = state.row
            head = f"{state.case_id} [{row.level}] {row.requirement}\n" if row else ""
            where = rep.location
            rep.longrepr = f"{head}{exc.render()}\n({where[0]}:{(where[1] or 0) + 1})"
        if state.baselined:
            rep.outcome = "skipped"
            rep.wasxfail = f"baseline: {state.case_id}"  # type: ignore[attr-defined]
            state.phases.append("expected-fail")
        else:
            state.phases.append("fail")
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
