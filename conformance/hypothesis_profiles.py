"""Hypothesis settings profiles of the property machines: ``ci`` (default), ``thorough``,
``certify``.

Rules:
- ``ci``: all seven families in ≤ 40 s on 2 cores (few examples, short stories, derandomised by
  the run seed so a CI failure replays); ``thorough``: many more examples; ``certify``: between
  the two, the vendor's run.
- The seed is always printed (``print_blob`` and the run seed in the header) and the example
  database lives in the run's out dir (``<out>/hypothesis``), so a failure replays from it.
- :func:`register` is called once by the pytest plugin when it loads; the profile is chosen by
  ``$CONFORMANCE_HYPOTHESIS_PROFILE`` (default ``ci``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, Phase, Verbosity, settings
from hypothesis.database import DirectoryBasedExampleDatabase

ENV = "CONFORMANCE_HYPOTHESIS_PROFILE"
#: name → (max_examples, stateful_step_count)
PROFILES: dict[str, tuple[int, int]] = {"ci": (3, 20), "thorough": (60, 40), "certify": (10, 30),
                                        "smoke": (2, 4)}  # smoke: the harness' own unit tests
SUPPRESS = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much]


def register(out: Path | None = None) -> None:
    """Register the three profiles (with the example database under ``out`` when given)."""
    db = DirectoryBasedExampleDatabase(str(out / "hypothesis")) if out is not None else None
    for name, (examples, steps) in PROFILES.items():
        kw: dict[str, Any] = {"database": db} if db is not None else {}
        settings.register_profile(
            f"conformance-{name}", max_examples=examples, stateful_step_count=steps,
            deadline=None, suppress_health_check=SUPPRESS, print_blob=True,
            verbosity=Verbosity.normal,
            phases=(Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink),
            **kw)


def current() -> str:
    name = os.environ.get(ENV, "ci")
    return name if name in PROFILES else "ci"


def machine_settings(seed: int | None = None) -> settings:
    """The settings a machine run uses: the chosen profile, derandomised under ``ci`` with a
    given seed (the run seed) so the same seed runs the same stories."""
    name = current()
    if f"conformance-{name}" not in settings._profiles:  # noqa: SLF001 - registered lazily
        register()
    base = settings.get_profile(f"conformance-{name}")
    return settings(base, derandomize=False) if seed is None else settings(base)
