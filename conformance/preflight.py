"""certify's first look at the machine, before anything heavy is imported: on a fresh clone
without ``scripts/setup.sh`` the Python dependencies are missing too, and the answer must still
be one line naming what to install (exit 2), never an ``ImportError`` traceback.

Rules of this module: it imports nothing outside the standard library and the catalogue's
data modules; it reads only ``--profile``, ``--cases``, ``--catalogue`` and
``--skip-unavailable`` of the arguments (certify parses them all again).
"""

from __future__ import annotations

import argparse
from importlib.util import find_spec

from .catalogue import CATALOGUE, PROFILES, case_patterns
from .environment import install_line, missing

#: the modules certify imports (pyproject's dependencies), by import name
PYTHON_MODULES = ("pytest", "pytest_asyncio", "xdist", "aiohttp", "aiosqlite", "hypothesis",
                  "rich", "jinja2", "jsonschema")


def problem(argv: list[str]) -> str | None:
    """The one line to print (exit 2) when the Python dependencies are missing, else None
    (certify then checks everything itself)."""
    absent_py = [m for m in PYTHON_MODULES if find_spec(m) is None]
    if not absent_py:
        return None
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--profile", default="core")
    p.add_argument("--cases")
    p.add_argument("--catalogue")
    p.add_argument("--skip-unavailable", action="store_true")
    ns, _ = p.parse_known_args(argv)
    line = (f"the Python dependencies are not installed ({', '.join(absent_py)}): run "
            "scripts/setup.sh")
    if ns.skip_unavailable or ns.catalogue or ns.profile not in PROFILES:
        return line
    absent = missing(CATALOGUE.selection(ns.profile, case_patterns(ns.cases)))
    return f"{install_line(absent)}; and {line}" if absent else line
