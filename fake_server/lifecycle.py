"""The server-side command lifecycle, sans-IO; its table is what the hub runs.

Rules:
- A command is ``queued`` until first delivered, ``delivered`` until admitted, ``admitted``
  until it ends; it ends once (state ``ended``).
- ``admit`` that the validity rules refuse is recorded (``admit_refused``) and leaves the
  state where it was; an admit is possible before the first delivery (a replayed id).
- A ``result`` ends the command from any live state. From ``queued`` or ``delivered`` (no admit
  recorded) upstream accepts it too, so it is applied, but recorded as the distinct transition
  ``result without admit``: the witness a checker quotes.
- It also ends by its deadline (504 ``runner_command_uncertain``), by the runner going offline
  (503 ``runner_offline``), or by a server-side channel close (409
  ``runner_command_not_admitted``).
- Anything that happens to an ended command (a late result, a duplicate result) is ignored, and
  ``apply`` says so with the reason: a late result *is* evidence.
- A runner's error result reaches the caller as HTTP 502 with the runner's message (cut at 1000
  UTF-16 units, as JavaScript's ``slice``) and code (``String(code ?? 'runner_error')``: an empty
  string is kept). Upstream validates no result schema: any truthy ``error`` is an error.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from . import codes
from .codes import Code


class State(Enum):
    QUEUED = "queued"
    DELIVERED = "delivered"
    ADMITTED = "admitted"
    ENDED = "ended"


class Event(Enum):
    DELIVER = "deliver"
    ADMIT = "admit"
    ADMIT_REFUSED = "admit_refused"
    RESULT = "result"
    EXPIRE = "expire"
    OFFLINE = "offline"
    CANCEL = "cancel"


RESULT_WITHOUT_ADMIT = "result without admit"

# state -> event -> (next state, note recorded with the step; "" when none)
TRANSITIONS: dict[State, dict[Event, tuple[State, str]]] = {
    State.QUEUED: {
        Event.DELIVER: (State.DELIVERED, ""),
        Event.ADMIT: (State.ADMITTED, "admitted before delivery"),
        Event.ADMIT_REFUSED: (State.QUEUED, ""),
        Event.RESULT: (State.ENDED, RESULT_WITHOUT_ADMIT),
        Event.EXPIRE: (State.ENDED, ""),
        Event.OFFLINE: (State.ENDED, ""),
        Event.CANCEL: (State.ENDED, ""),
    },
    State.DELIVERED: {
        Event.DELIVER: (State.DELIVERED, "redelivered"),
        Event.ADMIT: (State.ADMITTED, ""),
        Event.ADMIT_REFUSED: (State.DELIVERED, ""),
        Event.RESULT: (State.ENDED, RESULT_WITHOUT_ADMIT),
        Event.EXPIRE: (State.ENDED, ""),
        Event.OFFLINE: (State.ENDED, ""),
        Event.CANCEL: (State.ENDED, ""),
    },
    State.ADMITTED: {
        Event.DELIVER: (State.ADMITTED, "redelivered"),
        Event.ADMIT: (State.ADMITTED, "admitted again"),
        Event.ADMIT_REFUSED: (State.ADMITTED, "admit refused after an admit"),
        Event.RESULT: (State.ENDED, ""),
        Event.EXPIRE: (State.ENDED, ""),
        Event.OFFLINE: (State.ENDED, ""),
        Event.CANCEL: (State.ENDED, ""),
    },
    State.ENDED: {},  # everything after the end is ignored
}


@dataclass(frozen=True)
class Step:
    """What ``apply`` did: ``target`` None means the event was ignored, and ``note`` says why."""

    event: Event
    source: State
    target: State | None
    note: str = ""

    @property
    def applied(self) -> bool:
        return self.target is not None


def step(state: State, event: Event) -> Step:
    row = TRANSITIONS[state].get(event)
    if row is None:
        return Step(event, state, None, f"{event.value} ignored: command {state.value}")
    return Step(event, state, row[0], row[1])


@dataclass(frozen=True)
class Outcome:
    """What the server-side caller of a command sees."""

    ok: bool
    result: Any = None
    status: int = 200
    code: str | None = None
    message: str | None = None

    @classmethod
    def success(cls, result: Any) -> Outcome:
        return cls(True, result, 200, None, None)

    @classmethod
    def failure(cls, status: int, code: str, message: str) -> Outcome:
        return cls(False, None, status, code, message)

    @classmethod
    def refusal(cls, row: Code, message: str | None = None) -> Outcome:
        """A failure named by its row of ``codes`` (status and default message from there)."""
        return cls(False, None, row.status, row.code, row.message if message is None else message)


OFFLINE = Outcome.refusal(codes.RUNNER_OFFLINE)
UNCERTAIN = Outcome.refusal(codes.RUNNER_COMMAND_UNCERTAIN)
NOT_ADMITTED = Outcome.refusal(codes.RUNNER_COMMAND_NOT_ADMITTED)


def _js_string(value: Any) -> str:
    """JavaScript's ``String(value)`` for the JSON values a body can hold."""
    if isinstance(value, str):
        return value
    if value is True or value is False:
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, int | float):
        return json.dumps(value) if not float(value).is_integer() else str(int(value))
    if isinstance(value, list):
        return ",".join("" if v is None else _js_string(v) for v in value)
    return "[object Object]"


def js_slice(text: str, units: int) -> str:
    """``text.slice(0, units)`` counting UTF-16 code units (a surrogate pair may be cut)."""
    raw = text.encode("utf-16-le", "surrogatepass")
    return raw[: units * 2].decode("utf-16-le", "surrogatepass")


def _truthy(value: Any) -> bool:
    return value not in (None, False, 0, "") and not (isinstance(value, float) and value != value)


def outcome_from_result(body: dict[str, Any], max_text: int = 1000) -> Outcome:
    """Map a runner's ``result`` body to the caller's outcome (a truthy error → 502)."""
    err = body.get("error")
    if _truthy(err):
        fields = err if isinstance(err, dict) else {}
        message = fields.get("message")
        code = fields.get("code")
        text = "runner error" if message is None else _js_string(message)
        return Outcome.failure(codes.RUNNER_ERROR.status,
                               codes.RUNNER_ERROR.code if code is None else _js_string(code),
                               js_slice(text, max_text))
    return Outcome.success(body.get("result"))


@dataclass
class Lifecycle:
    """One command's state; ``apply`` returns the ``Step`` (applied or ignored, with its note)."""

    state: State = State.QUEUED
    deliveries: int = 0
    steps: list[Step] = field(default_factory=list)

    def apply(self, event: Event) -> Step:
        s = step(self.state, event)
        if s.target is None:
            return s
        self.state = s.target
        self.steps.append(s)
        if event is Event.DELIVER:
            self.deliveries += 1
        return s

    @property
    def history(self) -> list[Event]:
        return [s.event for s in self.steps]

    @property
    def ended(self) -> bool:
        return self.state is State.ENDED
