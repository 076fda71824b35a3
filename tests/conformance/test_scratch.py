"""Where world files go (conformance/scratch.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conformance import scratch


def test_an_explicit_directory_wins() -> None:
    assert scratch.scratch_dir({"CONFORMANCE_SCRATCH": "/x", "TMPDIR": "/y"}) == "/x"


def test_an_explicit_tmpdir_is_the_users_choice() -> None:
    assert scratch.scratch_dir({"TMPDIR": "/y"}) is None


def test_a_memory_backed_directory_with_room(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(scratch, "CANDIDATES", (str(tmp_path),))
    monkeypatch.setattr(scratch, "MIN_FREE", 1)
    assert scratch.scratch_dir({}) == str(tmp_path)


def test_a_small_or_missing_candidate_is_not_used(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(scratch, "CANDIDATES", (str(tmp_path / "absent"), str(tmp_path)))
    monkeypatch.setattr(scratch, "MIN_FREE", 1 << 62)
    assert scratch.scratch_dir({}) is None


def _dead_pid() -> int:
    proc = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    return int(proc.stdout)


def test_sweep_removes_the_directories_of_gone_processes_only(tmp_path) -> None:
    dead = _dead_pid()
    (tmp_path / f"conformance-world-{dead}-abc").mkdir()
    (tmp_path / f"conformance-runner-{dead}-def" / "state").mkdir(parents=True)
    mine = tmp_path / f"conformance-world-{os.getpid()}-ghi"
    parent = tmp_path / f"conformance-world-{os.getppid()}-jkl"   # alive
    other = tmp_path / f"elsewhere-{dead}-x"
    for p in (mine, parent, other):
        p.mkdir()
    assert sorted(scratch.sweep(str(tmp_path))) == [f"conformance-runner-{dead}-def",
                                                   f"conformance-world-{dead}-abc"]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(p.name for p in (mine, parent,
                                                                                  other))


def test_make_dir_names_the_process_and_sweeps_once(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("CONFORMANCE_SCRATCH", str(tmp_path))
    monkeypatch.setattr(scratch, "_swept", set())
    stale = tmp_path / f"conformance-world-{_dead_pid()}-old"
    stale.mkdir()
    made = scratch.make_dir("world")
    assert made.parent == tmp_path and made.name.startswith(f"conformance-world-{os.getpid()}-")
    assert not stale.exists()
    stale.mkdir()
    scratch.make_dir("runner")
    assert stale.exists()   # swept once per process and directory
