"""The table of every external program a case (or a house test) uses: data only, no I/O.

A program's name, the Debian package that installs it, the files whose presence means it is
installed (globs under the machine's root) and why the harness needs it. The catalogue refuses
a row that needs a program not listed here; :mod:`conformance.environment` probes them.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Program:
    name: str
    package: str  # Debian package
    files: tuple[str, ...]  # globs under the root; any hit means installed
    why: str


PROGRAMS: dict[str, Program] = {p.name: p for p in (
    Program("faketime", "faketime",
            ("usr/lib/*/faketime/libfaketimeMT.so.1", "usr/lib/faketime/libfaketimeMT.so.1"),
            "libfaketime preloaded into the runner to move its clock (receipt retirement, "
            "lease re-checks)"),
)}

#: programs only the house tests use (tests/, e2e/), not any conformance case: installed by
#: ``scripts/setup.sh --test``; listed so that the one table names every program of the repo.
HOUSE_PROGRAMS: dict[str, Program] = {p.name: p for p in (
    Program("node", "nodejs", ("usr/bin/node",), "cross-checks against upstream's TypeScript"),
    Program("chromium", "chromium", ("usr/bin/chromium",), "the admin e2e and report tests"),
)}
