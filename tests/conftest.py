"""tests/: the house tests' scratch files (``TMPDIR``) on a RAM file system when the machine has
one; the rules and the reason are in ``tests/scratch.py``."""

from __future__ import annotations

import os
import tempfile

import pytest

from tests.scratch import OPT_OUT, SHM, ram_tmpdir


def pytest_configure(config: pytest.Config) -> None:
    path = ram_tmpdir(os.environ)
    if path is not None:
        os.environ["TMPDIR"] = str(path)
        tempfile.tempdir = None   # gettempdir() reads TMPDIR again


def pytest_report_header(config: pytest.Config) -> str:
    where = tempfile.gettempdir()
    kind = "tmpfs" if where.startswith(f"{SHM}/") else "as the environment says"
    return f"house tests' scratch files: {where} ({kind}; {OPT_OUT}=disk keeps them on disk)"
