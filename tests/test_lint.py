"""The code base stays ``ruff`` and ``mypy`` clean (configuration in pyproject.toml)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("tool", ["ruff", "mypy"])
def test_static_checks_clean(tool: str) -> None:
    if tool == "ruff":
        argv = [sys.executable, "-m", "ruff", "check", "."]
    else:
        argv = [sys.executable, "-m", "mypy", "--cache-dir", "/tmp/hrc-mypy-cache"]
    proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
