"""One reader for the code-table tests of both packages: where a source spells a code by hand.

``code_literals(source, codes)``: (line, text) of every string constant outside docstrings that
is one of ``codes``, and (``bodies``) of every dict literal with both ``error`` and ``code`` keys (an error body
built by hand), sorted."""
from __future__ import annotations

import ast
from collections.abc import Collection


def docstring_ids(tree: ast.AST) -> set[int]:
    ids: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                ids.add(id(body[0].value))
    return ids


def code_literals(source: str, codes: Collection[str], *, bodies: bool = True
                  ) -> list[tuple[int, str]]:
    tree = ast.parse(source)
    skip = docstring_ids(tree)
    hits: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip \
                and node.value in codes:
            hits.append((node.lineno, node.value))
        if bodies and isinstance(node, ast.Dict):
            keys = {k.value for k in node.keys if isinstance(k, ast.Constant)}
            if {"error", "code"} <= keys:
                hits.append((node.lineno, "{error, code} body"))
    return sorted(hits)
