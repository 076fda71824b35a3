"""The root ``conftest.py``'s settings for the project's own test run: the heap alive after
collection is frozen, and ``-n`` without ``--dist`` distributes with worksteal (an explicit
``--dist`` wins; a run without xdist is left alone)."""

from __future__ import annotations

import gc
from pathlib import Path
from types import ModuleType, SimpleNamespace

import pytest

ROOT_CONFTEST = Path(__file__).resolve().parents[1] / "conftest.py"


def root_conftest(config: pytest.Config) -> ModuleType:
    """The root conftest as this session loaded it (not imported a second time)."""
    for plugin in config.pluginmanager.get_plugins():
        if isinstance(plugin, ModuleType) and getattr(plugin, "__file__", "") == str(ROOT_CONFTEST):
            return plugin
    raise AssertionError("the root conftest.py is not loaded")


def test_the_heap_alive_after_collection_is_frozen() -> None:
    assert gc.get_freeze_count() > 0
    assert gc.get_threshold()[0] == 10_000


@pytest.mark.parametrize(("option", "dist"), [
    ({"numprocesses": 2, "dist": "no"}, "worksteal"),        # -n 2
    ({"numprocesses": 2, "dist": "loadgroup"}, "loadgroup"),  # -n 2 --dist loadgroup
    ({"numprocesses": None, "dist": "no"}, "no"),             # no -n
    ({}, None),                                               # -p no:xdist: no such options
])
def test_n_without_dist_distributes_with_worksteal(request: pytest.FixtureRequest,
                                                  option: dict, dist: str | None) -> None:
    config = SimpleNamespace(option=SimpleNamespace(**option))
    root_conftest(request.config).pytest_cmdline_main(config)
    assert getattr(config.option, "dist", None) == dist
