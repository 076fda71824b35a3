"""Where a world keeps its files: the runner's state directory, the control plane's store, the
scripted Hermes' files. Reads the environment and the candidates' free space, nothing else.

Rules:
- ``CONFORMANCE_SCRATCH=DIR`` names the directory; an explicit ``TMPDIR`` is the user's choice
  and is kept (``None``: :mod:`tempfile`'s default).
- Otherwise a memory-backed directory (:data:`CANDIDATES`, ``/dev/shm``) when it is a writable
  directory with at least :data:`MIN_FREE` bytes free: a world's files are small, live for one
  case or a few, and are written with ``fsync`` by the runner's ledger and the control plane's
  store, which a disk makes the runner and the harness wait for (and deleting a world's
  directory costs a disk's metadata writes). What a case checks does not change: a kill -9
  keeps what the killed process wrote in the page cache either way.
- Else ``None`` (the default temp directory): a container's small ``/dev/shm`` (64 MiB) is not
  used.
- A world's directories are named for the process that made them
  (``conformance-<kind>-<pid>-…``, :func:`make_dir`). A process killed before it removed its
  own (a worker past its timeout, a SIGKILLed certify) leaves them, in memory when the scratch
  directory is ``/dev/shm``; so the first :func:`make_dir` of a process removes every such
  directory whose process is gone (:func:`sweep`). A live process's are never touched.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path

#: memory-backed directories tried in order
CANDIDATES = ("/dev/shm",)
#: the free space a candidate must have (the artifact cases write tens of MiB per world)
MIN_FREE = 2 * 1024 ** 3


def scratch_dir(env: Mapping[str, str] | None = None) -> str | None:
    """The directory world files go to (``mkdtemp(dir=…)``), or None for the default."""
    env = os.environ if env is None else env
    if env.get("CONFORMANCE_SCRATCH"):
        return env["CONFORMANCE_SCRATCH"]
    if env.get("TMPDIR"):
        return None
    for path in CANDIDATES:
        try:
            if (os.path.isdir(path) and os.access(path, os.W_OK | os.X_OK)
                    and shutil.disk_usage(path).free >= MIN_FREE):
                return path
        except OSError:
            continue
    return None


#: a world directory's name: its kind and the pid of the process that made it
OWNED = re.compile(r"^conformance-(?:world|runner)-(\d+)-")
_swept: set[str] = set()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass   # another user's process: alive
    return True


def sweep(directory: str) -> list[str]:
    """Remove the world directories in ``directory`` whose making process is gone; their
    names (what was removed)."""
    gone: list[str] = []
    try:
        names = os.listdir(directory)
    except OSError:
        return gone
    for name in names:
        m = OWNED.match(name)
        if m and int(m.group(1)) != os.getpid() and not _alive(int(m.group(1))):
            shutil.rmtree(os.path.join(directory, name), ignore_errors=True)
            gone.append(name)
    return gone


def make_dir(kind: str) -> Path:
    """A new directory for a world's files of ``kind`` (``world``, ``runner``) in
    :func:`scratch_dir`, named for this process; the first call for a directory sweeps it."""
    where = scratch_dir()
    base = where or tempfile.gettempdir()
    if base not in _swept:
        _swept.add(base)
        sweep(base)
    return Path(tempfile.mkdtemp(prefix=f"conformance-{kind}-{os.getpid()}-", dir=where))
