"""docs/positive-controls.md is generated from the table and fails when stale."""
from __future__ import annotations

import dataclasses

from positive_controls import docs
from positive_controls.registry import CONTROLS


def test_docs_are_current() -> None:
    assert docs.PATH.read_text(encoding="utf-8") == docs.render(), \
        "docs/positive-controls.md is stale: run python -m positive_controls.docs --write"


def test_docs_name_every_control() -> None:
    text = docs.render()
    for c in CONTROLS:
        assert f"| `{c.name}` |" in text


def test_a_changed_table_makes_the_docs_stale() -> None:
    changed = (dataclasses.replace(CONTROLS[0], contrary="another choice"), *CONTROLS[1:])
    assert docs.render(changed) != docs.render()


def test_check_mode_reports_staleness(tmp_path, monkeypatch) -> None:
    stale = tmp_path / "positive-controls.md"
    stale.write_text("old\n")
    monkeypatch.setattr(docs, "PATH", stale)
    assert docs.main(["--check"]) == 1
    assert docs.main(["--write"]) == 0
    assert docs.main(["--check"]) == 0


def test_docs_hold_no_machine_paths() -> None:
    text = docs.render()
    assert "/work/" not in text and "/root/" not in text and "/tmp/" not in text


def test_the_docs_are_linked() -> None:
    root = docs.PATH.parent.parent
    assert "positive-controls.md" in (root / "README.md").read_text(encoding="utf-8")
    assert "positive_controls/" in (root / "docs" / "architecture.md").read_text(encoding="utf-8")
