"""Independence of the oracle, made checkable (issue 8 item 6; design §"independence").

Rules, checked over the import graph that ``tests/import_graph.py`` reads (every
``import``/``from`` anywhere in a file: module level, inside functions, under
``if TYPE_CHECKING:``; plus ``importlib.import_module`` and ``__import__`` with a constant name):

1. ``fake_server`` imports nothing of ``runner_ref``, and ``runner_ref`` nothing of
   ``fake_server``, ``fixtures`` or ``conformance``: the two ends of the wire share no code.
2. ``conformance`` never imports ``runner_ref``: the runner under test is a black box.
3. ``fixtures`` (the scripted Hermes) imports none of ``runner_ref``, ``fake_server``,
   ``conformance``.
4. No test outside ``tests/cross/`` (and ``tests/test_codes_doc.py``) imports both ``fake_server`` and ``runner_ref``; ``tests/cross``
   is where rules written twice on purpose are compared.
5. The sans-IO modules (``SANS_IO``; ``pkg.*`` is a package and all its modules) import no I/O module (``IO_MODULES``) — ``os``/``time``
   only where ``EXCEPTIONS`` documents why — and every product module they import is sans-IO too.
6. No import circle inside any product package, ``TYPE_CHECKING`` and lazy imports included
   (an edge goes to the most specific module named: see ``tests/import_graph.py``).

Each rule is a function over a ``Tree`` (module name → the modules it imports), so the tests at
the bottom feed the same functions a synthetic tree that breaks each rule once.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import pytest

from .import_graph import Tree, covers, import_cycle, package_tree, synthetic, top

PRODUCT = ("fake_server", "runner_ref", "fixtures", "conformance")
TEST_DIRS = ("tests", "e2e")
#: where tests may import both ends: the differential tests, and the code-table check
CROSS = ("tests.cross", "tests.test_codes_doc")

FORBIDDEN: dict[str, frozenset[str]] = {
    "fake_server": frozenset({"runner_ref"}),
    "runner_ref": frozenset({"fake_server", "fixtures", "conformance"}),
    "conformance": frozenset({"runner_ref"}),
    "fixtures": frozenset({"runner_ref", "fake_server", "conformance"}),
}

SANS_IO: tuple[str, ...] = (
    "fake_server.gates", "fake_server.validity", "fake_server.lifecycle",
    "fake_server.tool_calls", "fake_server.artifacts", "fake_server.admin_gates",
    "fake_server.codes", "fake_server.timings", "fake_server.wire",
    "runner_ref.ledger", "runner_ref.allowlists", "runner_ref.fingerprint",
    "runner_ref.http_plan", "runner_ref.codes", "runner_ref.errors", "runner_ref.paths",
    "runner_ref.timings", "runner_ref.js_text", "fake_server.admin_schemas",
    "runner_ref.teamtools.gates", "runner_ref.teamtools.call_rules", "runner_ref.teamtools.ids",
    "conformance.checks.*",
    "conformance.catalogue", "conformance.case_row", "conformance.rows.*", "conformance.programs",
    "conformance.shards", "conformance.witness", "conformance.session_cmd",
    "conformance.reference_cmd", "conformance.run_order",
)

IO_MODULES = frozenset({
    "asyncio", "aiohttp", "aiosqlite", "socket", "subprocess", "os", "threading", "selectors",
    "ssl", "http", "urllib.request", "shutil", "multiprocessing", "sqlite3", "time", "signal",
    "requests", "httpx", "pathlib", "tempfile", "io",
})

# module → (the I/O modules it may import, why)
#: One worker parses the tree once (the module fixtures), instead of each xdist worker again.
pytestmark = pytest.mark.xdist_group("independence")

EXCEPTIONS: dict[str, tuple[frozenset[str], str]] = {
    "runner_ref.timings": (frozenset({"os", "time"}),
                           "reads RUNNER_* overrides from os.environ once; now_ms() is time.time "
                           "so faketime moves it"),
    "runner_ref.paths": (frozenset({"os"}),
                         "containment needs os.path.realpath/isfile (symlinks are followed once)"),
}

# --- the rules --------------------------------------------------------------------------------

def forbidden_imports(tree: Tree, rules: Mapping[str, frozenset[str]] = FORBIDDEN) -> list[str]:
    bad = []
    for mod, deps in sorted(tree.items()):
        banned = rules.get(top(mod), frozenset())
        bad += [f"{mod} imports {d}" for d in sorted(deps) if top(d) in banned]
    return bad


def both_ends_importers(tree: Tree, cross: tuple[str, ...] = CROSS) -> list[str]:
    return sorted(
        mod for mod, deps in tree.items()
        if not any(covers(c, mod) for c in cross)
        and {"fake_server", "runner_ref"} <= {top(d) for d in deps})


def io_in_sans_io(tree: Tree, sans_io: Iterable[str] = SANS_IO,
                  exceptions: Mapping[str, tuple[frozenset[str], str]] = EXCEPTIONS,
                  io: frozenset[str] = IO_MODULES) -> list[str]:
    sans = _expand(sans_io, tree)
    bad = []
    for mod in sorted(sans):
        if mod not in tree:
            bad.append(f"{mod} is listed as sans-IO but does not exist")
            continue
        allowed = exceptions.get(mod, (frozenset(), ""))[0]
        for dep in sorted(tree[mod]):
            if any(covers(m, dep) for m in io - allowed):
                bad.append(f"{mod} imports {dep}")
            elif top(dep) in PRODUCT and dep in tree and dep not in sans and not dep.endswith(
                    "__init__"):
                bad.append(f"{mod} imports {dep}, which is not sans-IO")
    return bad


def _expand(names: Iterable[str], tree: Tree) -> set[str]:
    out: set[str] = set()
    for name in names:
        if name.endswith(".*"):
            pkg = name[:-2]
            out.update(m for m in tree if covers(pkg, m))
            out.add(pkg)
        else:
            out.add(name)
    return out


# --- the tests on the real tree ---------------------------------------------------------------

@pytest.fixture(scope="module")
def product() -> dict[str, frozenset[str]]:
    return package_tree(*PRODUCT)


@pytest.fixture(scope="module")
def tests_tree() -> dict[str, frozenset[str]]:
    return package_tree(*TEST_DIRS)


def test_the_scan_sees_every_package(product: Tree) -> None:
    assert {top(m) for m in product} == set(PRODUCT)
    assert "fake_server.hub" in product and "runner_ref.teamtools.gates" in product


def test_packages_import_only_what_they_may(product: Tree) -> None:
    assert forbidden_imports(product) == []


def test_no_test_outside_cross_imports_both_ends(tests_tree: Tree) -> None:
    assert both_ends_importers(tests_tree) == []


def test_sans_io_modules_import_no_io(product: Tree) -> None:
    assert io_in_sans_io(product) == []


def test_every_exception_is_a_listed_sans_io_module() -> None:
    assert set(EXCEPTIONS) <= set(SANS_IO)
    assert all(reason for _, reason in EXCEPTIONS.values())


@pytest.mark.parametrize("package", PRODUCT)
def test_no_import_circle(product: Tree, package: str) -> None:
    cycle = import_cycle(product, package)
    assert cycle is None, " → ".join(cycle or [])


# --- each check can fail: synthetic trees -----------------------------------------------------

def test_a_lazy_import_of_the_runner_in_the_server_is_caught() -> None:
    tree = synthetic({"fake_server/hub.py": "def f():\n    import runner_ref.ledger\n"})
    assert forbidden_imports(tree) == ["fake_server.hub imports runner_ref.ledger"]


def test_a_type_checking_import_in_conformance_is_caught() -> None:
    tree = synthetic({"conformance/world.py": (
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
        "    from runner_ref.codes import Code\n")})
    assert forbidden_imports(tree) == ["conformance.world imports runner_ref.codes"]


def test_a_dynamic_import_in_fixtures_is_caught() -> None:
    tree = synthetic({"fixtures/hermes/core.py": (
        "import importlib\nm = importlib.import_module('fake_server.gates')\n")})
    assert forbidden_imports(tree) == ["fixtures.hermes.core imports fake_server.gates"]


def test_an_import_in_any_kind_of_block_is_read() -> None:
    # the reader walks statement lists only (tests/import_graph.py): each kind is one edge here
    tree = synthetic({"runner_ref/x.py": (
        "try:\n    import a1\nexcept ImportError:\n    import a2\nelse:\n    import a3\n"
        "finally:\n    import a4\n"
        "class C:\n    import a5\n    def m(self):\n        with x:\n            import a6\n"
        "match y:\n    case 1:\n        import a7\n"
        "while z:\n    import a8\nfor i in j:\n    pass\nelse:\n    import a9\n"
        "async def f():\n    async with w:\n        async for k in w:\n            import a10\n"
        "g = lambda: [__import__('a11') for _ in ()]\n")})
    assert tree["runner_ref.x"] == frozenset(f"a{i}" for i in range(1, 12))


def test_the_runner_importing_the_harness_is_caught() -> None:
    tree = synthetic({"runner_ref/poll_loop.py": "from conformance import adapter\n",
                       "runner_ref/x.py": "from fixtures import ScriptedHermes\n"})
    assert forbidden_imports(tree) == ["runner_ref.poll_loop imports conformance",
                                       "runner_ref.x imports fixtures"]


def test_a_test_importing_both_ends_is_caught_outside_cross_only() -> None:
    body = "import fake_server\nfrom runner_ref import fingerprint\n"
    tree = synthetic({"tests/runner_ref/test_x.py": body, "tests/cross/test_y.py": body})
    assert both_ends_importers(tree) == ["tests.runner_ref.test_x"]


def test_io_in_a_sans_io_module_is_caught() -> None:
    tree = synthetic({
        "fake_server/gates.py": "async def f():\n    import asyncio\n",
        "fake_server/validity.py": "from . import store\n",
        "fake_server/store.py": "import aiosqlite\n",
        "runner_ref/timings.py": "import os\nimport socket\n",
    })
    bad = io_in_sans_io(tree, ("fake_server.gates", "fake_server.validity", "runner_ref.timings",
                               "runner_ref.gone"))
    assert bad == [
        "fake_server.gates imports asyncio",
        "fake_server.validity imports fake_server.store, which is not sans-IO",
        "runner_ref.gone is listed as sans-IO but does not exist",
        "runner_ref.timings imports socket",
    ]


def test_a_circle_through_type_checking_and_relative_imports_is_caught() -> None:
    tree = synthetic({
        "fake_server/__init__.py": "from .plane import ControlPlane\n",
        "fake_server/plane.py": "from . import admin\n",
        "fake_server/admin.py": ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                 "    from .plane import ControlPlane\n"),
        "fixtures/hermes/a.py": "from ..hermes import b\n",
        "fixtures/hermes/b.py": "def f():\n    from fixtures.hermes.a import x\n",
    })
    assert import_cycle(tree, "fake_server") == [
        "fake_server.plane", "fake_server.admin", "fake_server.plane"]
    assert import_cycle(tree, "fixtures") == [
        "fixtures.hermes.a", "fixtures.hermes.b", "fixtures.hermes.a"]
    assert import_cycle(synthetic({"runner_ref/a.py": "from . import b\n",
                                    "runner_ref/b.py": ""}), "runner_ref") is None
