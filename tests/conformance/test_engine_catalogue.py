"""The catalogue as data: row rules, both-ways binding to tests, the generated case docs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from conformance.casedoc import DOC, bound_tests, markdown
from conformance.catalogue import CATALOGUE, Case, Catalogue, CatalogueError
from conformance.marks import case_mark

from .engine_sample import UNUSED_PLUGINS

pytest_plugins = ["pytester"]
ROOT = Path(__file__).resolve().parents[2]


def row(**kw: object) -> Case:
    base: dict[str, object] = dict(id="GEN-003", level="MUST",
                                   requirement="A stale epoch MUST be refused.", section="2.4",
                                   family="generations")
    base.update(kw)
    return Case(**base)  # type: ignore[arg-type]


def test_a_good_row_is_looked_up_by_id() -> None:
    cat = Catalogue([row(), row(id="TT-001", family="team tools", feature="team-tools",
                                upstream="runner.test.ts#11")])
    assert cat["GEN-003"].section == "2.4" and "TT-001" in cat and len(cat) == 2
    assert [c.id for c in cat.in_profile("core")] == ["GEN-003"]
    assert [c.id for c in cat.in_profile("team-tools")] == ["GEN-003", "TT-001"]


@pytest.mark.parametrize(
    ("kw", "problem"),
    [
        ({"id": "GEN3"}, "id must look like GEN-003"),
        ({"id": "XYZ-001"}, "unknown family prefix XYZ"),
        ({"family": "dedupe"}, "does not match prefix GEN"),
        ({"level": "MUST", "requirement": "A stale epoch is refused."}, "must state its level"),
        ({"level": "OUGHT"}, "level must be one of"),
        ({"feature": "warp-drive"}, "unknown feature"),
        ({"section": " "}, "section is empty"),
        ({"upstream": "runner.test.ts"}, "upstream anchor"),
    ],
)
def test_a_bad_row_is_refused_by_name(kw: dict[str, object], problem: str) -> None:
    with pytest.raises(CatalogueError, match=problem):
        Catalogue([row(**kw)])


def test_duplicate_ids_are_refused() -> None:
    with pytest.raises(CatalogueError, match="GEN-003: duplicate"):
        Catalogue([row(), row()])


def test_every_catalogued_case_has_a_test_and_every_case_test_a_row(
    pytester: pytest.Pytester,
) -> None:
    items, _ = pytester.inline_genitems("--pyargs", "conformance.cases", "-p", "conformance.plugin",
                                        *UNUSED_PLUGINS)
    bound: dict[str, list[str]] = {}
    for item in items:
        mark = case_mark(item)
        assert mark is not None, f"{item.nodeid} is in conformance/cases but has no @case"
        bound.setdefault(mark[0], []).append(f"{item.path.name}::{item.name}")
    # the case docs' test column reads the same binding from the sources
    assert bound_tests() == {cid: tests[0] for cid, tests in bound.items()}
    assert all(len(tests) == 1 for tests in bound.values())
    missing_tests = sorted(set(CATALOGUE.ids()) - set(bound))
    missing_rows = sorted(set(bound) - set(CATALOGUE.ids()))
    assert not missing_tests, f"catalogued cases without a test: {missing_tests}"
    assert not missing_rows, f"case tests without a catalogue row: {missing_rows}"


def test_both_ways_check_can_fail(pytester: pytest.Pytester) -> None:
    """The check above sees an orphan test: the same collection on a project that has one."""
    pytester.makepyfile(test_x='''
from conformance.marks import case

@case("GEN-777")
def test_orphan():
    pass
''')
    items, _ = pytester.inline_genitems("-p", "conformance.plugin", *UNUSED_PLUGINS)
    ids = {m[0] for m in (case_mark(i) for i in items) if m}
    assert ids - set(CATALOGUE.ids()) == {"GEN-777"}


def test_generated_case_docs_are_current() -> None:
    assert DOC.read_text() == markdown(CATALOGUE), (
        "docs/conformance-cases.md is stale: run `python -m conformance cases --write`")


def test_case_docs_list_each_row() -> None:
    cat = Catalogue([row(), row(id="GEN-004", requirement="Results SHOULD | be kept.",
                                level="SHOULD", upstream="runner.test.ts#17")])
    md = markdown(cat)
    assert "| GEN-003 | MUST | A stale epoch MUST be refused. | §2.4 | core |  | `" in md
    assert "| GEN-004 | SHOULD |" in markdown(cat, tests={}) and md.count("::test_") == 2
    assert "Results SHOULD \\| be kept." in md and "runner.test.ts#17" in md
    assert "## GEN — generations" in md and "| SHOULD | 1 |" in md


def test_cases_command_prints_the_same_markdown() -> None:
    proc = subprocess.run([sys.executable, "-m", "conformance", "cases", "--markdown"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout == markdown(CATALOGUE)
