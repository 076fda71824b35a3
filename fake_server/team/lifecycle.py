"""The task lifecycle of the team world, as data (sans-IO).

Rules:
- A task is created ``open``; each step below moves it, and only from the states listed.
  A step from any other state is refused with ``team_task_state`` (409) and changes nothing.
- ``review`` has two verdicts: ``approve`` (→ ``approved``) and ``changes`` (→ ``changes``,
  back to the assignee, who is dispatched again with ``assign``).
- ``complete`` (complete the goal) is the last step: the task is ``complete`` and a report goes
  back to the session the task was created from (the originating session).
- The table is what runs: ``next_state`` is the only place a transition is decided.
"""
from __future__ import annotations

from dataclasses import dataclass

from . import codes as tc
from .codes import TeamError

OPEN, ASSIGNED, APPROVED, CHANGES, COMPLETE = "open", "assigned", "approved", "changes", "complete"


@dataclass(frozen=True)
class Transition:
    step: str                  # "assign", "review:approve", "review:changes", "complete"
    from_states: frozenset[str]
    to_state: str


TRANSITIONS: tuple[Transition, ...] = (
    Transition("assign", frozenset({OPEN, CHANGES}), ASSIGNED),
    Transition("review:approve", frozenset({ASSIGNED}), APPROVED),
    Transition("review:changes", frozenset({ASSIGNED}), CHANGES),
    Transition("complete", frozenset({APPROVED}), COMPLETE),
)
_BY_STEP = {t.step: t for t in TRANSITIONS}


def next_state(step: str, state: str) -> str:
    """The state after ``step`` from ``state``; ``TeamError(tc.TEAM_TASK_STATE)`` if not allowed."""
    t = _BY_STEP[step]
    if state not in t.from_states:
        raise TeamError(tc.TEAM_TASK_STATE)
    return t.to_state
