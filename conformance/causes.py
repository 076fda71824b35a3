"""Why cases did not pass, folded: one line per distinct cause, with the count and the IDs.

Rules of this module (sans-IO):
- A case's cause is whichever field holds it (:func:`cause`): ``expected``/``actual`` of a
  verdict, else the first line of ``detail`` (an exception's text, without its class name), else
  the status's own meaning.
- Causes fold after :data:`NORMALISE` has replaced what varies per case (ports, paths, ids,
  case IDs, long numbers); a fold shows the cause as written when every case wrote the same,
  else the normalised text.
- :func:`folds` lists the folds of the cases whose status is shown (:data:`SHOWN`: a failure,
  an error of the harness, a case not run), most cases first: the first fold is the most
  common cause.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from .results import BY_STATUS, CaseResult

#: statuses whose cases get a cause line: every one the JUnit file reports as a failure or an
#: error, and every one that leaves the run unjudged
SHOWN = tuple(s.name for s in BY_STATUS.values() if s.junit in ("failure", "error") or not s.judged)

#: (pattern, placeholder): what varies between cases of one cause, replaced before folding
NORMALISE: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b"), "<id>"),
    (re.compile(r"\b[0-9a-f]{12,}\b"), "<id>"),
    (re.compile(r"(?:/[\w.@+-]+){2,}/?"), "<path>"),
    (re.compile(r"\b(?:127\.0\.0\.1|localhost|\[::1\]):\d+"), "<host:port>"),
    (re.compile(r"\b[A-Z]{2,5}-\d{3}\b"), "<case>"),
    (re.compile(r"\b\d+\.\d+\b"), "<n>"),
    (re.compile(r"\b\d{3,}\b"), "<n>"),
)
_CLASS_PREFIX = re.compile(r"^(?:[a-z_]\w*\.)*[A-Z]\w*(?:Error|Exited|Exception|Timeout|Failed|"
                           r"Unjudged|Program|Warning): ")


def cause(c: CaseResult) -> str:
    """The one-line cause of ``c`` (see the module rules)."""
    if c.expected or c.actual:
        return f"{first_line(c.actual)} (expected: {first_line(c.expected)})"
    text = first_line(c.detail)
    text = re.sub(r"^(?:Skipped: )?(?:not-run|not-applicable): ", "", text)
    text = _CLASS_PREFIX.sub("", text, count=1)
    return text or BY_STATUS[c.status].meaning


def first_line(text: str, limit: int = 300) -> str:
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    return line if len(line) <= limit else line[: limit - 1] + "…"


def normalise(text: str) -> str:
    for pattern, placeholder in NORMALISE:
        text = pattern.sub(placeholder, text)
    return text


@dataclass
class Fold:
    status: str
    cause: str
    ids: list[str] = field(default_factory=list)
    replay: str = ""

    def line(self) -> str:
        n = len(self.ids)
        return f"{n} case{'s' if n > 1 else ''} {self.status}: {self.cause} [{', '.join(self.ids)}]"


def folds(cases: Iterable[CaseResult]) -> list[Fold]:
    """The folded causes of the shown cases, most cases first (ties: status order, first ID)."""
    groups: dict[tuple[str, str], Fold] = {}
    raw: dict[tuple[str, str], set[str]] = {}
    for c in cases:
        if c.status not in SHOWN:
            continue
        text = cause(c)
        key = (c.status, normalise(text))
        fold = groups.setdefault(key, Fold(c.status, key[1], replay=c.replay))
        fold.ids.append(c.id)
        raw.setdefault(key, set()).add(text)
    for key, fold in groups.items():
        if len(raw[key]) == 1:
            fold.cause = next(iter(raw[key]))
    return sorted(groups.values(), key=lambda f: (-len(f.ids), SHOWN.index(f.status), f.ids[0]))


def cause_lines(cases: Iterable[CaseResult]) -> list[str]:
    """The terminal's lines: the most common cause first, then one line per fold (a fold of one
    case also gets its replay command)."""
    found = folds(cases)
    if not found:
        return []
    top = found[0]
    lines = [f"most common cause ({len(top.ids)} case{'s' if len(top.ids) > 1 else ''} "
             f"{top.status}): {top.cause}"]
    for f in found:
        lines.append(f"  {f.line()}")
        if len(f.ids) == 1 and f.replay:
            lines.append(f"    replay: {f.replay}")
    return lines
