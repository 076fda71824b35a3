"""fixtures/ has no import circle (``TYPE_CHECKING`` and lazy imports count) and no big module."""

from __future__ import annotations

from pathlib import Path

from ..import_graph import import_cycle, package_tree, synthetic

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "fixtures"
MAX_LINES = 420


def test_no_import_circle_in_fixtures() -> None:
    tree = package_tree("fixtures")
    assert "fixtures.hermes.server" in tree
    cycle = import_cycle(tree, "fixtures")
    assert cycle is None, " → ".join(cycle or [])


def test_the_cycle_finder_finds_a_type_checking_circle() -> None:
    tree = synthetic({
        "fixtures/hermes/a.py": "from . import b\n",
        "fixtures/hermes/b.py": "from .c import X\n",
        "fixtures/hermes/c.py": ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                 "    from .a import Y\n"),
        "fixtures/hermes/d.py": "",
    })
    assert import_cycle(tree, "fixtures") == [
        "fixtures.hermes.a", "fixtures.hermes.b", "fixtures.hermes.c", "fixtures.hermes.a"]


def test_no_module_over_the_size_limit() -> None:
    big = {str(p.relative_to(ROOT)): n for p in PACKAGE.rglob("*.py")
           if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert big == {}
