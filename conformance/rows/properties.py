"""Catalogue rows of the property machines (tests: conformance/cases/test_properties.py).

One row per family machine of :mod:`conformance.machines.families`; each is judged by every
invariant of :mod:`conformance.checks.invariants` over the recorded facts of each example, and
:data:`JUDGED_BY` names the invariants that carry the row's promise (the ones its negative
controls are caught by: ``tests/negative_controls/test_property_controls.py``).
"""

from __future__ import annotations

from ..case_row import Case

F = "property machines"

ROWS: tuple[Case, ...] = (
    Case("PROP-001", "MUST", "Under any story of profile changes, effective profiles MUST be the "
         "intersection runner ∩ account ∩ source and no effect MUST happen without a granted "
         "admit of the same epoch.", "2.6.2", F),
    Case("PROP-002", "MUST", "Under any story of duplicate deliveries and replays, a command id "
         "MUST execute at most once and a replay with another payload MUST be refused "
         "idempotency_conflict while the stored receipt survives.", "4.3", F),
    Case("PROP-003", "MUST", "Under any story of kill -9 at any step of a command's life, a "
         "started command MUST never execute again (runner_command_uncertain) and every "
         "completed receipt MUST survive the restart.", "4.2", F, needs=("faketime",)),
    Case("PROP-004", "MUST", "Under any story of server restarts, watchdog expiries and reset "
         "polls, no result, event or tool call MUST be accepted under a stale epoch or from a "
         "fenced instance.", "2.4", F),
    Case("PROP-005", "MUST", "Under any story of dropped, failing and slow answers on poll, admit "
         "and result, the runner MUST reconnect and lose no completed receipt.", "2.8", F),
    Case("PROP-006", "MUST", "Under any story of closes, interrupts and revocations overtaking "
         "opens and prompts, no channel or lease MUST be alive after its close and no effect "
         "after its revocation.", "3.4", F),
    Case("PROP-007", "MUST", "Under any story of channels and sessions, no event of a session "
         "MUST be posted on a channel that does not own it.", "3.3", F),
)

#: case id → machine name in conformance.machines.families.MACHINES
MACHINE_OF: dict[str, str] = {
    "PROP-001": "permission", "PROP-002": "dedupe", "PROP-003": "receipts",
    "PROP-004": "generations", "PROP-005": "reconnection", "PROP-006": "cancel",
    "PROP-007": "isolation",
}

#: case id → the invariants that carry the row's promise (every invariant judges every example)
JUDGED_BY: dict[str, tuple[str, ...]] = {
    "PROP-001": ("INV-2", "INV-9"),            # admit before effect; the profile intersection
    "PROP-002": ("INV-1", "INV-6", "INV-10"),  # at most once; the receipt survives; conflicts
    "PROP-003": ("INV-1", "INV-6", "INV-7"),   # at most once; receipts; no rerun after a kill
    "PROP-004": ("INV-5", "INV-8", "INV-11"),  # stale epochs, fenced instances; closed stays closed
    "PROP-005": ("INV-1", "INV-6"),            # reconnect and lose no receipt
    "PROP-006": ("INV-2", "INV-3", "INV-8"),   # admit, revocation, closed stays closed
    "PROP-007": ("INV-4",),                    # session ownership
}
