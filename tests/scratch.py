"""Where the house tests keep their scratch files: on a RAM file system when the machine has one
(used by ``tests/conftest.py``).

Why: every control plane, runner ledger and scripted Hermes these tests start keeps a real
SQLite database in WAL mode, and every commit waits for its fsync. On a disk that wait is most
of a small test's time: a ``ControlPlane`` starts and stops in ~70 ms with its database on disk
and in ~20 ms on tmpfs. On tmpfs the database, file modes, locks, renames and symlinks behave as
on disk; only the flush costs nothing (no test here cuts the power).

Rules of this module:
- When ``TMPDIR`` is not set and ``/dev/shm`` is a tmpfs with at least ``ROOM`` bytes free,
  ``TMPDIR`` becomes a private directory there (mode 0700, ours) for this session and for every
  process it starts (xdist workers inherit it; runners and servers the tests launch too, unless
  a test gives them a ``TMPDIR`` of their own). pytest's ``tmp_path`` base moves with it.
- An explicit ``TMPDIR`` is the user's choice and is kept; ``HOUSE_TESTS_TMP=disk`` keeps the
  default as well. The run's header says where the scratch files are.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from pathlib import Path

SHM = Path("/dev/shm")
ROOM = 2 * 1024**3  # bytes free on the tmpfs, or the tests stay on disk
OPT_OUT = "HOUSE_TESTS_TMP"


def _is_tmpfs(path: Path) -> bool:
    try:
        mounts = Path("/proc/mounts").read_text(encoding="utf-8").splitlines()
    except OSError:
        return False
    return any(len(f := line.split()) > 2 and f[1] == str(path) and f[2] == "tmpfs"
               for line in mounts)


def _private_dir(parent: Path) -> Path | None:
    """``parent/hermes-runner-tests-<uid>``, created 0700, or None if it is not safely ours."""
    path = parent / f"hermes-runner-tests-{os.getuid()}"
    try:
        path.mkdir(mode=0o700)
    except FileExistsError:
        pass
    except OSError:
        return None
    st = path.lstat()
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
        return None   # a symlink, someone else's, or open to others: not a place for tokens
    return path


def ram_tmpdir(environ: Mapping[str, str], shm: Path = SHM) -> Path | None:
    """The directory to use as ``TMPDIR``, or None to leave the environment as it is."""
    if environ.get("TMPDIR") or environ.get(OPT_OUT) == "disk":
        return None
    if not _is_tmpfs(shm):
        return None
    try:
        vfs = os.statvfs(shm)
    except OSError:
        return None
    if vfs.f_bavail * vfs.f_frsize < ROOM:
        return None
    return _private_dir(shm)
