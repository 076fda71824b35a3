"""One catalogue row: a conformance case as data (no pytest, no I/O)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Level = Literal["MUST", "SHOULD", "MAY"]
LEVELS: tuple[Level, ...] = ("MUST", "SHOULD", "MAY")


@dataclass(frozen=True)
class Case:
    id: str
    level: Level
    requirement: str
    section: str
    family: str
    feature: str = "core"
    upstream: str | None = None
    #: external programs the case needs (keys of conformance.environment.PROGRAMS)
    needs: tuple[str, ...] = ()

    @property
    def prefix(self) -> str:
        return self.id.split("-", 1)[0]


__all__ = ["LEVELS", "Case", "Level"]
