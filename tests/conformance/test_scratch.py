"""Where world files go (conformance/scratch.py)."""

from __future__ import annotations

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
