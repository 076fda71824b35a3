"""A negative control as one row of data: the reference runner with one realistic bug.

Rules of this module:
- A :class:`Control` row holds its name, family, the bug in one sentence, the real failure mode
  it models, the one seam it patches, how the replacement is built from the original, and the
  case IDs (``docs/protocol.md`` cases of ``conformance.catalogue``) that MUST fail against it.
- Every control has a fast in-process probe that shows the bug once the seam is patched and its
  absence without it (``test_seams.py`` runs both), in the probe module named like its controls
  module (``controls_wire.py`` ↔ ``tests/negative_controls/nc_probes_wire.py``).
- A row is data: :mod:`negative_controls.registry` validates every row (unique names, one seam,
  case IDs shaped ``PREFIX-NNN``) and ``docs/negative-controls.md`` is generated from the rows.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from . import seams

NAME_RE = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
CASE_RE = re.compile(r"^[A-Z]{2,5}-\d{3}$")
FAMILIES = ("wire", "permission", "secrets", "dedupe", "receipts", "generations",
            "reconnection", "cancel", "isolation", "config-process", "limits", "team-tools")


@dataclass(frozen=True)
class Control:
    name: str
    family: str
    bug: str
    models: str
    seam: str
    cases: tuple[str, ...]
    make: seams.MakeReplacement
    rebind: bool = False

    def apply(self) -> seams.Applied:
        """Patch the seam in this process (the runner then runs with the bug)."""
        return seams.apply(self.seam, self.make, rebind=self.rebind)


def problems(row: Control) -> list[str]:
    out: list[str] = []
    if not NAME_RE.match(row.name):
        out.append("name must be kebab-case")
    if row.family not in FAMILIES:
        out.append(f"unknown family {row.family!r}")
    if not row.cases:
        out.append("no catching case")
    out += [f"case id {c!r} is not PREFIX-NNN" for c in row.cases if not CASE_RE.match(c)]
    if not row.bug.strip() or not row.models.strip():
        out.append("bug and models must be stated")
    return out


def const(value: Any) -> seams.MakeReplacement:
    """A replacement that ignores the original: the constant ``value``."""
    return lambda _original: value
