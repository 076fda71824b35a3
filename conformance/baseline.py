"""Baselines: the expected failures a vendor adopts the suite with.

Rules of this module:
- A baseline is a text file, one case ID per line, ``#`` starts a comment; or a JSON file that
  is a list of IDs, an object ``{"cases": [...]}``, or a ``results.json`` (its failing cases).
- A baselined case that fails is ``expected-fail``; a baselined case that passes is ``stale``
  and fails the run, so a baseline only ever shrinks.
- An unreadable or malformed baseline is a :class:`BaselineError` with a one-line message.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from .catalogue import ID_RE

FAILING = ("fail", "expected-fail")


class BaselineError(ValueError):
    """The baseline cannot be used (message is one line, safe to print)."""


def parse(text: str, *, source: str = "baseline") -> frozenset[str]:
    stripped = text.lstrip()
    ids: list[str]
    if stripped.startswith(("[", "{")):
        try:
            data: Any = json.loads(text)
        except json.JSONDecodeError as exc:
            raise BaselineError(f"{source}: not valid JSON ({exc.msg}, line {exc.lineno})") from None
        if isinstance(data, dict) and isinstance(data.get("cases"), list):
            cases = data["cases"]
            if cases and isinstance(cases[0], dict):
                ids = [c.get("id", "") for c in cases if c.get("status") in FAILING]
            else:
                ids = list(cases)
        elif isinstance(data, list):
            ids = list(data)
        else:
            raise BaselineError(f"{source}: expected a list of case IDs or {{\"cases\": [...]}}")
    else:
        ids = [line.split("#", 1)[0].strip() for line in text.splitlines()]
        ids = [i for i in ids if i]
    bad = [i for i in ids if not isinstance(i, str) or not ID_RE.match(i)]
    if bad:
        raise BaselineError(f"{source}: not a case ID: {bad[0]!r}")
    return frozenset(ids)


def load(path: str | Path) -> frozenset[str]:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else type(exc).__name__
        raise BaselineError(f"cannot read baseline {p}: {reason}") from None
    return parse(text, source=str(p))


def render(failing: Iterable[str], *, header: str = "") -> str:
    lines = [f"# {line}" for line in header.splitlines()] if header else []
    lines += sorted(set(failing))
    return "\n".join(lines) + "\n"
