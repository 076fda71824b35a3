"""tests/cross: the one test directory that imports both fake_server and runner_ref, to compare
the rules written twice on purpose (see tests/test_independence.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from .node import NODE, Node


@pytest.fixture(scope="session")
def node() -> Iterator[Node]:
    if NODE is None:
        pytest.skip("node is not installed")
    n = Node()
    yield n
    n.close()
