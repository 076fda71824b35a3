"""Verdicts: how a case says *expected* vs *actual* and quotes the wire exchange that shows it.

Rules of this module:
- A failing case raises :class:`CaseFailed` (an ``AssertionError``, so plain ``assert`` keeps
  working and pytest reports it as a failure, not an error). It carries ``expected``, ``actual``
  and ``witness``: the few wire-exchange lines that prove the verdict, in the one format of
  :mod:`conformance.witness` (redacted by the caller's world; the plugin redacts once more
  before anything is written).
- :func:`expect` is the one-line form: ``expect(cond, expected=..., actual=..., witness=...)``.
- :class:`Unjudged` ends a case the harness could not judge (``error`` / ``timeout``).
- :func:`not_applicable` ends a case whose feature or precondition the runner does not offer;
  the plugin reports it as ``not-applicable``, never as a failure.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NoReturn

import pytest

NOT_APPLICABLE = "not-applicable"
NOT_RUN = "not-run"


class CaseFailed(AssertionError):
    """A requirement is broken: what the case expected, what it saw, and the exchange that shows it."""

    def __init__(self, expected: str, actual: str, witness: Iterable[str] = ()) -> None:
        self.expected = str(expected)
        self.actual = str(actual)
        self.witness: tuple[str, ...] = tuple(str(line) for line in witness)
        super().__init__(self.render())

    def render(self) -> str:
        lines = [f"expected: {self.expected}", f"actual:   {self.actual}"]
        if self.witness:
            lines.append("witness:")
            lines.extend(f"  {line}" for line in self.witness)
        return "\n".join(lines)


class Unjudged(Exception):
    """The case could not judge the runner: ``status`` is ``error`` or ``timeout`` (a harness
    problem, never the runner's failure); the message says what happened."""

    def __init__(self, status: str, message: str) -> None:
        if status not in ("error", "timeout"):
            raise ValueError(f"Unjudged status must be error or timeout, not {status!r}")
        self.status = status
        super().__init__(message)


def expect(cond: object, *, expected: str, actual: object, witness: Iterable[str] = ()) -> None:
    """Fail the case with expected/actual/witness unless ``cond`` is true."""
    if not cond:
        raise CaseFailed(expected, str(actual), witness)


def not_applicable(reason: str) -> NoReturn:
    """End the case as not-applicable (the runner does not offer what the case needs)."""
    pytest.skip(f"{NOT_APPLICABLE}: {reason}")
