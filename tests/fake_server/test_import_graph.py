"""No import circle inside fake_server, TYPE_CHECKING and function-level imports included."""

from __future__ import annotations

import ast
from pathlib import Path

import fake_server

PKG = Path(fake_server.__file__).parent


def _graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for path in PKG.glob("*.py"):
        name = path.stem
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                if node.module:
                    deps.add(node.module.split(".")[0])
                else:
                    deps.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("fake_server."):
                deps.add(node.module.split(".")[1])
        graph[name] = deps - {name}
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(n: str) -> list[str] | None:
        state[n] = 1
        stack.append(n)
        for m in sorted(graph.get(n, ())):
            if m == "__init__":
                continue
            if state.get(m) == 1:
                return stack[stack.index(m):] + [m]
            if m not in state and (found := visit(m)):
                return found
        stack.pop()
        state[n] = 2
        return None

    for n in sorted(graph):
        if n not in state and (found := visit(n)):
            return found
    return None


def test_no_import_circle_in_fake_server() -> None:
    assert _cycle(_graph()) is None, " → ".join(_cycle(_graph()) or [])


def test_the_detector_finds_a_circle() -> None:
    assert _cycle({"a": {"b"}, "b": {"a"}}) == ["a", "b", "a"]


def test_no_module_over_400_lines_in_the_split() -> None:
    split = ("hub", "queue", "handles", "validity", "relay", "plane", "verbs", "machine_api",
             "lifecycle", "lifecycle_log", "hub_state", "wire", "history")
    long = {n: len((PKG / f"{n}.py").read_text().splitlines()) for n in split}
    assert all(v <= 400 for v in long.values()), long
