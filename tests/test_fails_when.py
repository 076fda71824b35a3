"""Every case says how it fails, and every control it names there is one the self-test proves.

Rules:
- Each ``@case`` test's docstring has a ``fails when:`` line: the bugs that make it fail.
- A control named there is a *claim*: a parenthesised group after ``fails when:`` made only of
  control names (``(claim-upserts)``, ``(exits-on-poll-error, reset-only-first-poll)``), or
  ending in ``: name`` after prose (``(a timeout treated as fatal: exits-on-poll-error)``).
  Other parentheses are prose (``(e.g. upper-cased)``, ``(at-least-once delivery)``).
- Each claimed name is a control of :mod:`negative_controls.registry`, and its row declares the
  case: so ``tests/negative_controls/test_self_test.py`` runs that control against the case and
  fails unless the case fails. A claim the self-test does not prove is reworded or declared.
- The property and fault-matrix rows name the invariants that carry them (``JUDGED_BY`` of
  ``conformance/rows/properties.py`` and ``faults.py``), and their docstrings say the same.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from conformance.casedoc import CASES, _case_id
from conformance.checks.invariants import INVARIANTS
from conformance.rows import faults, properties
from negative_controls.registry import BY_NAME

NAME = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)+$")
MARK = "fails when:"


def claims(doc: str) -> list[str]:
    """The control names a docstring's ``fails when:`` part claims (see the rules above)."""
    i = doc.find(MARK)
    if i < 0:
        return []
    out: list[str] = []
    for group in re.findall(r"\(([^()]*)\)", doc[i:]):
        tail = " ".join(group.split()).rsplit(": ", 1)[-1]
        names = [n for n in re.split(r",\s*|\s+or\s+|\s+and\s+", tail) if n]
        if names and all(NAME.match(n) for n in names):
            out += names
    return out


def case_docs(cases: Path = CASES) -> dict[str, str]:
    """case ID -> the docstring of its ``@case`` test."""
    out: dict[str, str] = {}
    for path in sorted(cases.glob("test_*.py")):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for cid in filter(None, map(_case_id, node.decorator_list)):
                    out[cid] = ast.get_docstring(node) or ""
    return out


def unproven(docs: dict[str, str]) -> list[str]:
    bad = []
    for cid, doc in sorted(docs.items()):
        for name in claims(doc):
            if name not in BY_NAME:
                bad.append(f"{cid} names {name!r}, which is no negative control")
            elif cid not in BY_NAME[name].cases:
                bad.append(f"{cid} names {name}, whose row does not declare {cid} "
                           f"(declares {', '.join(BY_NAME[name].cases)})")
    return bad


DOCS = case_docs()


def test_every_case_says_how_it_fails() -> None:
    assert len(DOCS) > 200
    assert [cid for cid, doc in DOCS.items() if MARK not in doc] == []


def test_every_claimed_control_declares_the_case() -> None:
    assert unproven(DOCS) == []


def test_the_claims_are_many() -> None:
    """The parser still reads the house's claims (a format change would silence the check)."""
    assert sum(len(claims(d)) for d in DOCS.values()) >= 60


@pytest.mark.parametrize(("doc", "expected"), [
    ("fails when: the claim upserts (claim-upserts).", ["claim-upserts"]),
    ("fails when: a 409 is fatal (exits-on-poll-error), or no reset\n(reset-only-first-poll).",
     ["exits-on-poll-error", "reset-only-first-poll"]),
    ("fails when: it dies (a timeout treated as fatal: exits-on-poll-error).",
     ["exits-on-poll-error"]),
    ("fails when: a\nredelivery runs (rerun-inflight-redelivery,\nclaim-upserts or skip-admit)",
     ["rerun-inflight-redelivery", "claim-upserts", "skip-admit"]),
    ("fails when: it is upper-cased (e.g. upper-cased), at-least-once (at-least-once delivery)",
     []),
    ("Says (claim-upserts) before the mark.\n\nfails when: anything.", []),
    ("no mark (claim-upserts)", []),
])
def test_claims_are_read_from_the_fails_when_part(doc: str, expected: list[str]) -> None:
    assert claims(doc) == expected


def test_an_undeclared_or_unknown_claim_is_named() -> None:
    docs = {"DED-001": "fails when: the claim upserts (claim-upserts).",
            "DED-002": "fails when: a typo (claim-upsert)."}
    assert unproven(docs) == [
        f"DED-001 names claim-upserts, whose row does not declare DED-001 (declares "
        f"{', '.join(BY_NAME['claim-upserts'].cases)})",
        "DED-002 names 'claim-upsert', which is no negative control"]


def test_property_and_matrix_rows_name_the_invariants_that_carry_them() -> None:
    judged = {**properties.JUDGED_BY, **faults.JUDGED_BY}
    assert sorted(judged) == sorted(r.id for r in (*properties.ROWS, *faults.ROWS))
    known = {inv.id for inv in INVARIANTS}
    for cid, invariants in judged.items():
        assert set(invariants) <= known, cid
        named = set(re.findall(r"\bINV-\d+\b", DOCS[cid].split(MARK)[0]))
        assert named == set(invariants), f"{cid}'s docstring names {named}, JUDGED_BY {invariants}"
