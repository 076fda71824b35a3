"""docs/negative-controls.md is generated from the table and fails when stale."""
from __future__ import annotations

from negative_controls import docs
from negative_controls.registry import CONTROLS


def test_docs_are_current() -> None:
    current = docs.PATH.read_text(encoding="utf-8")
    assert current == docs.render(), \
        "docs/negative-controls.md is stale: run python -m negative_controls.docs --write"


def test_docs_name_every_control_and_its_cases() -> None:
    text = docs.render()
    for c in CONTROLS:
        assert f"| `{c.name}` |" in text and ", ".join(c.cases) in text


def test_a_changed_table_makes_the_docs_stale() -> None:
    changed = (CONTROLS[0].__class__(**{**CONTROLS[0].__dict__, "bug": "another bug"}),
               *CONTROLS[1:])
    assert docs.render(changed) != docs.render()


def test_check_mode_reports_staleness(tmp_path, monkeypatch) -> None:
    stale = tmp_path / "negative-controls.md"
    stale.write_text("old\n")
    monkeypatch.setattr(docs, "PATH", stale)
    assert docs.main(["--check"]) == 1
    assert docs.main(["--write"]) == 0
    assert docs.main(["--check"]) == 0


def test_docs_hold_no_machine_paths() -> None:
    text = docs.render()
    assert "/work/" not in text and "/root/" not in text and "/tmp/" not in text
