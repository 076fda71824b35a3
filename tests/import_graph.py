"""The one reader of import graphs for the tests (independence, import circles, install names).

Rules:
- Every ``import``/``from`` anywhere in a file counts: module level, inside functions, under
  ``if TYPE_CHECKING:``; so do ``importlib.import_module(...)`` and ``__import__(...)`` with a
  constant name.
- Names are absolute (relative imports resolved against the importing module).
- An edge goes to the most specific module named: ``from a import b`` → ``a.b`` when ``a.b`` is a
  module of the tree, else ``a``; so ``from . import codes`` is an edge to ``codes``, not to the
  package's ``__init__``.
- A ``Tree`` maps a module's dotted name to the modules it imports; the rules (forbidden edges,
  circles, sans-IO) are functions over a ``Tree``, so a test can feed them a synthetic tree
  (:func:`synthetic`) that breaks a rule once.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

Tree = Mapping[str, frozenset[str]]


@dataclass(frozen=True)
class Source:
    module: str          # dotted name, e.g. "fake_server.hub"
    is_package: bool     # an __init__.py
    text: str


@dataclass(frozen=True)
class ImportSite:
    line: int
    module: str          # absolute, before sharpening (``from a import b`` → "a")
    names: tuple[str, ...]   # the names of a ``from`` import; () for ``import a``
    level: int           # 0 for an absolute import


def module_name(path: Path, root: Path = ROOT) -> tuple[str, bool]:
    """``(dotted name, is a package)`` of a file below ``root``."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    is_package = parts[-1] == "__init__"
    if is_package:
        parts.pop()
    return ".".join(parts), is_package


def source(path: Path, root: Path = ROOT) -> Source:
    name, pkg = module_name(path, root)
    return Source(name, pkg, path.read_text(encoding="utf-8"))


def sources(top: str, root: Path = ROOT) -> list[Source]:
    """Every module of the folder ``top`` below ``root``."""
    return [source(path, root) for path in sorted((root / top).rglob("*.py"))]


def _resolve(src: Source, level: int, module: str | None) -> str:
    if level == 0:
        return module or ""
    base = src.module.split(".") if src.is_package else src.module.split(".")[:-1]
    base = base[: len(base) - (level - 1)] if level > 1 else base
    return ".".join(base + ([module] if module else []))


def _dynamic_import(func: ast.expr) -> bool:
    if isinstance(func, ast.Name):
        return func.id in {"__import__", "import_module"}
    return isinstance(func, ast.Attribute) and func.attr == "import_module"


def import_sites(src: Source) -> list[ImportSite]:
    """Every import statement or constant dynamic import of ``src``, in source order."""
    return list(_import_sites(src))


# Import statements sit only in statement lists (a module's, a def's or class's, an if's,
# a try's, a with's, a match case's): those are walked, not the expressions under them.
_BLOCKS = (ast.stmt, ast.excepthandler, ast.match_case)


@functools.cache
def _import_sites(src: Source) -> tuple[ImportSite, ...]:
    """(Parsed once per source text: several tests read the same trees.)"""
    tree = ast.parse(src.text)
    found: list[ImportSite] = []
    blocks: list[ast.AST] = [tree]
    while blocks:
        for node in ast.iter_child_nodes(blocks.pop()):
            if not isinstance(node, _BLOCKS):
                continue
            blocks.append(node)
            if isinstance(node, ast.Import):
                found += [ImportSite(node.lineno, alias.name, (), 0) for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                found.append(ImportSite(node.lineno, _resolve(src, node.level, node.module),
                                        tuple(a.name for a in node.names), node.level))
    # A dynamic import is a call anywhere in an expression; only a file that spells one of the
    # two names can hold one, and only such a file is walked whole.
    if "import_module" in src.text or "__import__" in src.text:
        for node in ast.walk(tree):
            if (isinstance(node, ast.Call) and node.args
                    and isinstance(node.args[0], ast.Constant)
                    and isinstance(node.args[0].value, str) and _dynamic_import(node.func)):
                found.append(ImportSite(node.lineno, node.args[0].value, (), 0))
    return tuple(sorted(found, key=lambda s: s.line))


def imports_of(src: Source, known: Iterable[str] = ()) -> frozenset[str]:
    """Every module ``src`` imports, absolute; ``known`` (all module names) sharpens
    ``from a import b`` into ``a.b`` when ``a.b`` is a module."""
    modules = set(known)
    found: set[str] = set()
    for site in import_sites(src):
        if not site.names:
            found.add(site.module)
            continue
        subs = [f"{site.module}.{n}" if site.module else n for n in site.names]
        hits = [s for s in subs if s in modules]
        found.update(hits)
        if len(hits) < len(subs) and site.module:
            found.add(site.module)
    return frozenset(found)


def tree_of(srcs: Iterable[Source]) -> dict[str, frozenset[str]]:
    srcs = list(srcs)
    known = {s.module for s in srcs}
    return {s.module: imports_of(s, known) for s in srcs}


def package_tree(*tops: str, root: Path = ROOT) -> dict[str, frozenset[str]]:
    """The ``Tree`` of the folders ``tops`` below ``root``."""
    return tree_of(s for top in tops for s in sources(top, root))


def synthetic(files: Mapping[str, str]) -> dict[str, frozenset[str]]:
    """A ``Tree`` of made-up files (relative path → text), for tests that a rule can fail."""
    srcs = []
    for rel, text in files.items():
        name, pkg = module_name(Path(rel), Path("."))
        srcs.append(Source(name, pkg, text))
    return tree_of(srcs)


def top(name: str) -> str:
    return name.split(".")[0]


def covers(prefix: str, name: str) -> bool:
    """``name`` is the module ``prefix`` or inside it."""
    return name == prefix or name.startswith(prefix + ".")


def import_cycle(tree: Tree, package: str) -> list[str] | None:
    """One import circle among the modules of ``package`` (``[a, b, a]``), or ``None``."""
    nodes = {m for m in tree if covers(package, m)}
    graph = {m: sorted(d for d in tree[m] if d in nodes and d != m) for m in nodes}
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(n: str) -> list[str] | None:
        state[n] = 1
        stack.append(n)
        for m in graph[n]:
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
