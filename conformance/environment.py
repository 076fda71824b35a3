"""The machine a run needs: every external program a case uses, as one table that runs.

Rules of this module:
- :data:`~conformance.programs.PROGRAMS` is the table (data only, in its own module): a
  program's name, its Debian package, the files whose presence means it is there (globs).
  Nothing else in the harness names a package.
- Which cases need a program is not listed here: a catalogue row declares it
  (``Case(..., needs=("faketime",))``), the catalogue refuses a need that is not in this table,
  and a case that *uses* a program its row does not declare ends ``error`` (the harness code
  that starts the program calls :func:`note_use`; the plugin compares at teardown). So the
  table, the rows and what the cases do cannot drift apart. A case run on a lane
  (:mod:`conformance.lanes`, several cases in flight) counts its uses in a set of its own
  (:func:`track`, a context variable: its task, what it awaits on other loops and
  ``asyncio.to_thread`` inherit it; a use from a thread pool the case starts itself goes to the
  process's count, which no case on a lane reads, so it is not checked there).
- :func:`missing` probes the files (the only I/O here); the search roots can be pointed
  elsewhere with ``CONFORMANCE_LIBRARY_ROOT`` (a test-only override: a root where nothing is
  installed makes every program missing).
- certify calls :func:`missing` for its selection before anything runs: a missing program is
  exit 2 with one line (:func:`install_line`); with ``--skip-unavailable`` the cases that need
  it are reported ``not-run`` instead (never fail, never a PASS for the profile).
"""

from __future__ import annotations

import glob
import os
import shlex
from collections.abc import Iterable
from contextvars import ContextVar

from .programs import HOUSE_PROGRAMS, PROGRAMS

ROOT_ENV = "CONFORMANCE_LIBRARY_ROOT"


def root() -> str:
    return os.environ.get(ROOT_ENV) or "/"


def installed(name: str) -> bool:
    prog = PROGRAMS.get(name) or HOUSE_PROGRAMS[name]
    return any(glob.glob(os.path.join(root(), pattern)) for pattern in prog.files)


def needed(rows: Iterable[object]) -> dict[str, list[str]]:
    """program -> the IDs of ``rows`` (catalogue rows) that need it."""
    out: dict[str, list[str]] = {}
    for row in rows:
        for name in getattr(row, "needs", ()):
            out.setdefault(name, []).append(str(getattr(row, "id", "?")))
    return out


def missing(rows: Iterable[object]) -> dict[str, list[str]]:
    """The programs ``rows`` need that are not installed -> the IDs that need them."""
    return {name: ids for name, ids in needed(rows).items() if not installed(name)}


def install_command(names: Iterable[str]) -> str:
    packages = sorted({(PROGRAMS.get(n) or HOUSE_PROGRAMS[n]).package for n in names})
    sudo = "" if os.geteuid() == 0 else "sudo "
    return f"{sudo}apt-get install -y {' '.join(shlex.quote(p) for p in packages)}"


def install_line(absent: dict[str, list[str]]) -> str:
    """One line: what is missing, for which cases, and the command that installs it."""
    parts = []
    for name, ids in sorted(absent.items()):
        shown = ", ".join(ids[:4]) + (f" and {len(ids) - 4} more" if len(ids) > 4 else "")
        parts.append(f"{name} (Debian package '{PROGRAMS[name].package}', needed by {shown})")
    return (f"not installed: {'; '.join(parts)}; install it with `{install_command(absent)}` "
            "(or scripts/setup.sh), or pass --skip-unavailable to report those cases not-run")


# -- use, as the harness starts a program (checked against the case's row by the plugin) ----

_USED: set[str] = set()
_CASE_USES: ContextVar[set[str] | None] = ContextVar("conformance_case_uses", default=None)


def note_use(name: str) -> None:
    """The harness is about to use ``name`` (a key of :data:`PROGRAMS`): counted for the case
    of this context (:func:`track`), else for the process."""
    if name not in PROGRAMS:
        raise KeyError(f"{name} is not in conformance.environment.PROGRAMS")
    mine = _CASE_USES.get()
    (mine if mine is not None else _USED).add(name)


def track() -> set[str]:
    """Count this context's uses (a lane's task, and what it starts) in a set of its own."""
    mine: set[str] = set()
    _CASE_USES.set(mine)
    return mine


def take_uses() -> set[str]:
    """The programs used since the last call (and forget them)."""
    used = set(_USED)
    _USED.clear()
    return used
