"""Seams: one attribute of the reference runner, replaced at launch (and put back in tests).

Rules of this module:
- A seam is named ``module:attr`` or ``module:Class.attr`` (``runner_ref.poll_loop:PollLoop._spawn``).
- A replacement is built from the original (``make(original) -> replacement``), so a control can
  wrap the reference behaviour and change exactly one thing in it.
- ``rebind=True`` also rebinds the same object wherever another ``runner_ref`` module imported it
  by name (``from .paths import contained_path``): one function is one seam, whichever module
  calls it. Without it only the named binding changes (a module that imported the name keeps the
  reference behaviour — that is how a control patches one call site of a shared rule).
- :func:`apply` returns an :class:`Applied` that :meth:`Applied.undo` reverses exactly, so the
  fast checks in ``tests/negative_controls`` leave the process as they found it.
"""
from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

MakeReplacement = Callable[[Any], Any]


class SeamError(LookupError):
    """A seam that does not name an attribute of the reference runner."""


def resolve(target: str) -> tuple[Any, str, Any]:
    """(owner object, attribute name, current value) of ``module:attr.path``."""
    module_name, _, path = target.partition(":")
    if not module_name.startswith("runner_ref") or not path:
        raise SeamError(f"seam {target!r} must look like runner_ref.module:attr")
    owner: Any = importlib.import_module(module_name)
    *parents, name = path.split(".")
    for part in parents:
        owner = getattr(owner, part)
    if name not in vars(owner):
        raise SeamError(f"seam {target!r}: {name} is not defined on {owner!r}")
    return owner, name, vars(owner)[name]


@dataclass
class Applied:
    """What one :func:`apply` changed: (owner, attribute, previous value) triples."""

    target: str
    replacement: Any
    original: Any
    changes: list[tuple[Any, str, Any]] = field(default_factory=list)

    def undo(self) -> None:
        for owner, name, previous in reversed(self.changes):
            setattr(owner, name, previous)
        self.changes.clear()


def _importers(original: Any) -> list[tuple[Any, str]]:
    """Every ``runner_ref`` module that holds ``original`` under some name."""
    found: list[tuple[Any, str]] = []
    for mod_name, mod in list(sys.modules.items()):
        if mod is None or not (mod_name == "runner_ref" or mod_name.startswith("runner_ref.")):
            continue
        for attr, value in list(vars(mod).items()):
            if value is original:
                found.append((mod, attr))
    return found


def apply(target: str, make: MakeReplacement, *, rebind: bool = False) -> Applied:
    """Replace the seam ``target`` with ``make(original)``."""
    importlib.import_module("runner_ref.__main__")   # the whole runner is loaded first, so
    importlib.import_module("runner_ref.poll_loop")  # every importer of a name is known
    owner, name, original = resolve(target)
    raw = original
    if isinstance(original, staticmethod | classmethod):
        raw = original.__func__
    replacement = make(raw)
    if isinstance(original, classmethod):
        replacement = classmethod(replacement)
    elif isinstance(original, staticmethod):
        replacement = staticmethod(replacement)
    done = Applied(target, replacement, original)
    places = [(owner, name)]
    if rebind:
        places += [p for p in _importers(original) if p != (owner, name)]
    for where, attr in places:
        done.changes.append((where, attr, vars(where)[attr]))
        setattr(where, attr, replacement)
    return done
