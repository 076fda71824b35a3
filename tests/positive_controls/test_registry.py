"""The table's rules: unique names, resolvable seams, and every open choice of docs/protocol.md
answered by a row (a new "implementation choice — not tested" sentence without one fails)."""
from __future__ import annotations

import dataclasses

import pytest

from negative_controls import seams
from positive_controls.control import problems
from positive_controls.registry import (
    COMPOSITES,
    CONTROLS,
    PROTOCOL,
    RegistryError,
    check,
    expand,
    sentences,
    unanswered,
)

TEXT = PROTOCOL.read_text(encoding="utf-8")


def test_the_table_keeps_its_rules() -> None:
    check()


def test_every_open_choice_has_a_row() -> None:
    found = sentences(TEXT)
    assert len(found) >= 26, len(found)
    assert unanswered(TEXT) == []


def test_a_new_open_choice_without_a_row_fails() -> None:
    text = TEXT + "\n- Whether the runner hums while it waits is an implementation\n  choice — not tested.\n"
    assert unanswered(text) == ["- Whether the runner hums while it waits is an implementation "
                                "choice — not tested."[2:]]
    with pytest.raises(RegistryError, match="without a positive control"):
        check(text=text)


def test_a_wrapped_sentence_is_still_found() -> None:
    assert any("What a runner does with a command that names none" in s for s in sentences(TEXT))


@pytest.mark.parametrize("control", CONTROLS, ids=[c.name for c in CONTROLS])
def test_each_row(control) -> None:
    assert problems(control) == []
    for p in control.patches:
        seams.resolve(p.seam)   # raises for a seam that names nothing


def test_a_broken_table_is_refused() -> None:
    row = CONTROLS[0]
    with pytest.raises(RegistryError, match="duplicate"):
        check((*CONTROLS, row))
    with pytest.raises(RegistryError, match="not in docs/protocol.md"):
        check((dataclasses.replace(row, sentence="no such sentence anywhere"), *CONTROLS[1:]))
    with pytest.raises(RegistryError, match="contrary choice is the reference"):
        check((dataclasses.replace(row, contrary=row.reference), *CONTROLS[1:]))
    with pytest.raises(RegistryError, match="without a positive control"):
        check(tuple(c for c in CONTROLS if c.name != "refuses-missing-profile"))


def test_composites_expand() -> None:
    assert {c.group for c in expand("contrary")} == {"choice"}
    assert {c.group for c in expand("slow")} == {"slow"}
    assert [c.name for c in expand("slow-start+late-events")] == ["slow-start", "late-events"]
    assert set(COMPOSITES["contrary"]) == {c.name for c in CONTROLS if c.group == "choice"}
    with pytest.raises(KeyError):
        expand("no-such-row")


def test_runner_ref_has_no_switches_for_us() -> None:
    from pathlib import Path

    import runner_ref
    for path in Path(runner_ref.__file__).parent.rglob("*.py"):
        assert "positive_control" not in path.read_text(encoding="utf-8"), path
