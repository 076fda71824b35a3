"""One knob for every bound of the harness: ``--timeout-multiplier`` (as web-platform-tests'
runner has), so a slow but correct runner on a slow machine is never failed for speed alone.

Rules of this module:
- The multiplier lives in the environment (:data:`ENV`), so every process of a run sees the
  same one: certify and the plugin's ``--timeout-multiplier`` set it, xdist workers and the
  negative-control sub-sessions inherit it. Default 1; it must be a number > 0.
- A bound of the harness is written as its base value and scaled where it is awaited
  (:func:`scaled`): the control plane's and Hermes' waits (fake_server/waiting.py,
  fixtures/hermes/effects.py read the same variable), the adapter's runner waits, the machines'
  ``within``, world start-up, and pytest-timeout's per-case bound. Protocol timings the
  harness *plays* (poll holds, watchdogs, deadlines) are not bounds and are never scaled.
"""

from __future__ import annotations

import os

ENV = "CONFORMANCE_TIMEOUT_MULTIPLIER"


class MultiplierError(ValueError):
    """A multiplier that is not a number > 0 (one-line message)."""


def parse(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise MultiplierError(f"--timeout-multiplier must be a number, not {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise MultiplierError(f"--timeout-multiplier must be > 0, not {text!r}")
    return value


def multiplier() -> float:
    text = os.environ.get(ENV, "")
    try:
        return parse(text) if text else 1.0
    except MultiplierError:
        return 1.0


def scaled(seconds: float) -> float:
    """``seconds`` of a harness bound, times the run's multiplier."""
    return seconds * multiplier()


def set_multiplier(value: float) -> None:
    os.environ[ENV] = repr(float(value))
