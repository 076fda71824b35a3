"""The code base stays ``ruff`` and ``mypy`` clean (configuration in pyproject.toml)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


# mypy over the whole tree is the longest single test (tens of seconds of one core): ``slow``,
# still run by the README's command.
@pytest.mark.parametrize("tool", ["ruff", pytest.param("mypy", marks=pytest.mark.slow)])
def test_static_checks_clean(tool: str) -> None:
    if tool == "ruff":
        argv = [sys.executable, "-m", "ruff", "check", "."]
    else:
        argv = [sys.executable, "-m", "mypy", "--cache-dir", "/tmp/hrc-mypy-cache"]
    proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
