"""The history checker: recorded facts in, violations with minimal witnesses out (sans-IO).

``facts`` is the fact model, ``translate`` maps the control plane's history and lifecycle log and
the scripted Hermes' effect log into facts, ``invariants`` is the table of invariants that runs
(its rows and checkers by concern in ``authority_invariants``, ``ledger_invariants``,
``channel_invariants`` and ``epoch_invariants``; ``proof`` holds what a proof is), ``witness``
minimises and verifies witnesses, ``render`` prints a violation.
"""

from .facts import Fact
from .invariants import INVARIANTS, Report, Violation, check

__all__ = ["INVARIANTS", "Fact", "Report", "Violation", "check"]
