"""A positive control as one row of data: the reference runner taking one open choice the other
way (or running at the slow edge of what the docs allow).

Rules of this module:
- A :class:`Control` row holds its name, its group (``choice``: a choice docs/protocol.md leaves
  open; ``slow``: a timing within the docs' bounds), ``sentence`` (words quoted from the
  docs/protocol.md sentence it answers, whitespace-normalised, unique enough to find it),
  ``reference`` (what runner_ref does), ``contrary`` (what this control does), and its patches.
- A :class:`Patch` is one seam (:mod:`negative_controls.seams`: ``runner_ref.module:attr``)
  and how its replacement is built from the original. Most rows patch one seam; a behaviour
  that needs two (an event set in one method, awaited in another) lists both.
- Every control has a fast in-process probe (``tests/positive_controls/pc_probes*.py``) that
  shows the contrary behaviour once patched and the reference behaviour without it.
- A composite (:data:`positive_controls.registry.COMPOSITES`) applies several rows at once;
  rows compose because each replacement wraps whatever the seam holds when it is applied.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from negative_controls import seams

NAME_RE = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
GROUPS = ("choice", "slow")


@dataclass(frozen=True)
class Patch:
    seam: str
    make: seams.MakeReplacement
    rebind: bool = False


@dataclass(frozen=True)
class Control:
    name: str
    group: str
    sentence: str
    reference: str
    contrary: str
    patches: tuple[Patch, ...]

    @property
    def seam_names(self) -> tuple[str, ...]:
        return tuple(p.seam + (" (every importer)" if p.rebind else "") for p in self.patches)

    def apply(self) -> list[seams.Applied]:
        """Patch every seam in this process (undo in reverse order)."""
        return [seams.apply(p.seam, p.make, rebind=p.rebind) for p in self.patches]


def one(seam: str, make: seams.MakeReplacement, rebind: bool = False) -> tuple[Patch, ...]:
    return (Patch(seam, make, rebind),)


def undo(applied: list[seams.Applied]) -> None:
    for a in reversed(applied):
        a.undo()


def flat(text: str) -> str:
    """Whitespace-normalised text (a docs sentence may wrap over a line break)."""
    return re.sub(r"\s+", " ", text).strip()


def problems(row: Control) -> list[str]:
    out: list[str] = []
    if not NAME_RE.match(row.name):
        out.append("name must be kebab-case")
    if row.group not in GROUPS:
        out.append(f"unknown group {row.group!r}")
    if not row.patches:
        out.append("no seam")
    if not (row.sentence.strip() and row.reference.strip() and row.contrary.strip()):
        out.append("sentence, reference and contrary must be stated")
    if flat(row.reference) == flat(row.contrary):
        out.append("the contrary choice is the reference's")
    return out
