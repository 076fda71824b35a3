"""No import circle inside fake_server, TYPE_CHECKING and function-level imports included
(the graph is ``tests/import_graph.py``'s, as for every other package)."""

from __future__ import annotations

from pathlib import Path

import fake_server

from ..import_graph import import_cycle, package_tree, synthetic

PKG = Path(fake_server.__file__).parent


def test_no_import_circle_in_fake_server() -> None:
    tree = package_tree("fake_server")
    assert "fake_server.team.world" in tree and "fake_server.hub" in tree
    cycle = import_cycle(tree, "fake_server")
    assert cycle is None, " → ".join(cycle or [])


def test_the_detector_finds_a_circle() -> None:
    tree = synthetic({"fake_server/a.py": "def f():\n    from . import b\n",
                      "fake_server/b.py": "from fake_server.a import x\n"})
    assert import_cycle(tree, "fake_server") == ["fake_server.a", "fake_server.b", "fake_server.a"]


def test_no_module_over_400_lines_in_the_split() -> None:
    split = ("hub", "queue", "handles", "validity", "relay", "plane", "verbs", "machine_api",
             "lifecycle", "lifecycle_log", "hub_state", "wire", "history")
    long = {n: len((PKG / f"{n}.py").read_text().splitlines()) for n in split}
    assert all(v <= 400 for v in long.values()), long
