"""The acceptance runs only when asked: ``HERMES_TEAM_RUNNER=1`` (one-line skip otherwise)."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ENABLED = os.environ.get("HERMES_TEAM_RUNNER") == "1"
SKIP = pytest.mark.skip(reason="acceptance runs only with HERMES_TEAM_RUNNER=1")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if ENABLED:
        return
    for item in items:
        if HERE in Path(str(item.path)).resolve().parents:
            item.add_marker(SKIP)
