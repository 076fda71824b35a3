"""Example budgets for the expensive Hypothesis tests (profiles: the root conftest.py).

Under ``ci`` an expensive test runs ``ci`` examples, sized to stay well under 10 s; under any other
profile (``thorough``) it runs the profile's own count.
"""

from __future__ import annotations

from hypothesis import settings


def examples(ci: int) -> int:
    if settings.get_current_profile_name() == "ci":
        return ci
    return settings().max_examples   # a fresh settings() inherits the loaded profile
