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
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping

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
