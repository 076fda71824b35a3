"""``@case("GEN-003", **world_options)``: binds a test function to its catalogue row.

The ID names the row in :mod:`conformance.catalogue` (level, requirement, section, family,
feature). Keyword arguments are the case's options for its world: the plugin's ``world``
fixture passes them to ``conformance.worlds.open_world(runner_cmd=..., hermes=..., seed=...,
**options)``. A coroutine test also gets ``pytest.mark.asyncio``, so the cases run the same
under ``asyncio_mode=strict`` in a vendor's repository as under ``auto`` here.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, TypeVar

import pytest

F = TypeVar("F", bound=Callable[..., Any])

MARK = "conformance_case"


def case(case_id: str, **world_options: Any) -> Callable[[F], F]:
    def bind(fn: F) -> F:
        marked = getattr(pytest.mark, MARK)(case_id, **world_options)(fn)
        if inspect.iscoroutinefunction(fn):
            marked = pytest.mark.asyncio(marked)
        return marked  # type: ignore[no-any-return]

    return bind


def case_mark(item: pytest.Item) -> tuple[str, dict[str, Any]] | None:
    """The (case id, world options) of a collected test, or None for an ordinary test."""
    mark = item.get_closest_marker(MARK)
    if mark is None or not mark.args:
        return None
    return str(mark.args[0]), dict(mark.kwargs)


#: A case that needs only Hermes' real behaviour (no pause point, no effect log): it runs under
#: ``--hermes real[:PATH]`` too; every other case is not-applicable there.
ANY_HERMES = "conformance_any_hermes"


def any_hermes(fn: F) -> F:
    """Mark a case as runnable against any Hermes, scripted or real."""
    return getattr(pytest.mark, ANY_HERMES)(fn)  # type: ignore[no-any-return]


def runs_on_any_hermes(item: pytest.Item) -> bool:
    return item.get_closest_marker(ANY_HERMES) is not None


#: A case that runs for many seconds (a fault-matrix row enumerating its cells, a property
#: family): under xdist it is started first, one per worker (:mod:`conformance.run_order`).
LONG = "conformance_long"


def long_case(fn: F) -> F:
    """Mark a case as long-running, so a parallel run starts it first."""
    return getattr(pytest.mark, LONG)(fn)  # type: ignore[no-any-return]


def is_long(item: pytest.Item) -> bool:
    return item.get_closest_marker(LONG) is not None
