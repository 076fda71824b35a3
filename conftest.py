"""The project's own tests (tests/, e2e/, conformance/): Hypothesis profiles, registered once.

- ``ci`` (the default): derandomized, so a run is reproducible from the commit alone; modest
  example counts; no example database (nothing left behind); no deadline (a loaded 2-core
  machine is not a failure); the failing example's blob is printed.
- ``thorough`` (``HYPOTHESIS_PROFILE=thorough``): random, 1000 examples, the database kept, for
  exploring. The expensive machines size themselves with ``tests.budget.examples``.
Tests do not set ``max_examples``, ``derandomize`` or ``database`` inline.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

_SLOW_OK = [HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
            HealthCheck.data_too_large]

settings.register_profile("ci", max_examples=50, derandomize=True, database=None, deadline=None,
                          print_blob=True, suppress_health_check=_SLOW_OK)
settings.register_profile("thorough", max_examples=1000, derandomize=False, deadline=None,
                          print_blob=True, suppress_health_check=_SLOW_OK)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
