"""Every positive control, by name, and the composites CI certifies.

Rules: names are unique (rows and composites share one namespace); every row passes
:func:`positive_controls.control.problems`; every sentence of docs/protocol.md that says
"implementation choice — not tested" is answered by a ``choice`` row whose ``sentence`` it
contains (:func:`unanswered` lists those that are not; a test fails on any), and every row's
``sentence`` is found in docs/protocol.md. :func:`check` raises on any breach.
Composites: ``contrary`` = every choice row at once; ``slow`` = every slow row that CI can
afford at once (jitter, late events, poll after admit); ``both`` = the two at once
(what CI certifies). The other timing edges (slow start — 2 s more on each of the ~150 runner
starts of a run —, reconnect pauses, poll gap, late admit) are certified one at a time by the nightly ``verify --each``.
"""
from __future__ import annotations

import re
from pathlib import Path

from . import choices_commands, choices_config, choices_teamtools, slow
from .control import Control, flat, problems

PROTOCOL = Path(__file__).resolve().parent.parent / "docs" / "protocol.md"
OPEN_RE = re.compile(r"implementation choice — not tested")

CONTROLS: tuple[Control, ...] = (
    *choices_config.CONTROLS, *choices_commands.CONTROLS, *choices_teamtools.CONTROLS,
    *slow.CONTROLS,
)
BY_NAME: dict[str, Control] = {c.name: c for c in CONTROLS}
COMPOSITES: dict[str, tuple[str, ...]] = {
    "contrary": tuple(c.name for c in CONTROLS if c.group == "choice"),
    "slow": ("jittered-control-plane", "jittered-hermes-http", "jittered-hermes-rpc",
             "late-events", "poll-after-admit"),
}
COMPOSITES["both"] = COMPOSITES["contrary"] + COMPOSITES["slow"]
#: issue 21's acceptance runner: refuses a command naming no profile, and its next poll reaches
#: the control plane later than the reference runner's (admit and next poll together).
COMPOSITES["no-profile-late-poll"] = ("refuses-missing-profile", "poll-after-admit")
#: What CI certifies, 3 runs in a row (tests/positive_controls/test_self_test.py): ``both`` —
#: every choice row and every CI slow row at once — fits the CI budget (one certify of the
#: team-tools profile per run); ``contrary`` and ``slow`` alone, and each row alone, are the
#: nightly ``python -m positive_controls.verify contrary slow --each --runs 3``.
CI_COMPOSITES: tuple[str, ...] = ("both",)


class RegistryError(ValueError):
    """The table breaks one of its rules."""


def sentences(text: str) -> list[str]:
    """Every sentence of ``text`` (whitespace-normalised) that leaves a choice open."""
    body = flat(text)
    out = []
    for m in OPEN_RE.finditer(body):
        start = max(body.rfind(". ", 0, m.start()) + 2, body.rfind(" - ", 0, m.start()) + 3, 0)
        end = body.find(". ", m.end())
        out.append(body[start:end + 1 if end >= 0 else len(body)])
    return out


def unanswered(text: str, rows: tuple[Control, ...] = CONTROLS) -> list[str]:
    """The open sentences of ``text`` that no choice row quotes: a row answers a sentence when
    its quote overlaps it in the text (a quote may begin in the sentence before)."""
    body = flat(text)
    spans = [(m.start(), m.end()) for r in rows if r.group == "choice"
             for m in re.finditer(re.escape(flat(r.sentence)), body)]
    out = []
    for s in sentences(text):
        at = body.find(s)
        if not any(a < at + len(s) and b > at for a, b in spans):
            out.append(s)
    return out


def expand(name: str) -> tuple[Control, ...]:
    """``a+b`` or a composite name → its rows, in order."""
    rows: list[Control] = []
    for part in name.split("+"):
        if part in COMPOSITES:
            rows += [BY_NAME[n] for n in COMPOSITES[part]]
        elif part in BY_NAME:
            rows.append(BY_NAME[part])
        else:
            raise KeyError(f"no positive control named {part!r}")
    return tuple(rows)


def check(rows: tuple[Control, ...] = CONTROLS, text: str | None = None) -> None:
    text = PROTOCOL.read_text(encoding="utf-8") if text is None else text
    names = [r.name for r in rows]
    dupes = sorted({n for n in names if names.count(n) > 1} | (set(names) & set(COMPOSITES)))
    if dupes:
        raise RegistryError(f"duplicate control names: {', '.join(dupes)}")
    for row in rows:
        bad = problems(row)
        if flat(row.sentence) not in flat(text):
            bad.append("its sentence is not in docs/protocol.md")
        if bad:
            raise RegistryError(f"{row.name}: {'; '.join(bad)}")
    missing = unanswered(text, rows)
    if missing:
        raise RegistryError("open choices without a positive control: " + " | ".join(missing))
    for comp, members in COMPOSITES.items():
        unknown = [n for n in members if n not in names]
        if rows is CONTROLS and unknown:
            raise RegistryError(f"composite {comp} names no control: {', '.join(unknown)}")
