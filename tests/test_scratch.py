"""tests/scratch.py: the house tests move their scratch files to a tmpfs only when it is safe."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests import scratch


def test_an_explicit_tmpdir_or_the_opt_out_is_kept() -> None:
    assert scratch.ram_tmpdir({"TMPDIR": "/somewhere"}) is None
    assert scratch.ram_tmpdir({scratch.OPT_OUT: "disk"}) is None


def test_a_directory_that_is_no_mount_point_is_not_taken_for_tmpfs(tmp_path: Path) -> None:
    assert scratch.ram_tmpdir({}, shm=tmp_path) is None


def test_the_private_directory_is_ours_and_closed(tmp_path: Path) -> None:
    made = scratch._private_dir(tmp_path)
    assert made is not None and made.stat().st_mode & 0o777 == 0o700
    assert scratch._private_dir(tmp_path) == made          # the next session reuses it
    made.chmod(0o755)
    assert scratch._private_dir(tmp_path) is None          # open to others: refused


def test_a_symlink_in_its_place_is_refused(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    target.mkdir(mode=0o700)
    os.symlink(target, tmp_path / f"hermes-runner-tests-{os.getuid()}")
    assert scratch._private_dir(tmp_path) is None


def test_too_little_room_keeps_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    if not scratch._is_tmpfs(scratch.SHM):
        pytest.skip("no tmpfs at /dev/shm")
    monkeypatch.setattr(scratch, "ROOM", 2**62)
    assert scratch.ram_tmpdir({}) is None
