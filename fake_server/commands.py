"""The server-side command lifecycle, sans-IO.

Rules:
- A command is ``queued`` until first delivered, then ``delivered`` until it ends; it ends once.
- It ends by a runner ``result`` (ok, or an error that the caller sees as HTTP 502 with the
  runner's code, default ``runner_error``, message cut to 1000 chars), by its deadline
  (504 ``runner_command_uncertain``), by the runner going offline (503 ``runner_offline``), or by
  its channel closing (409 ``runner_command_not_admitted``).
- Anything that happens to an ended command (a late result, a duplicate result) is ignored.
- ``admit`` is true only while the command has not ended and is unexpired (validity of channel,
  lease, account and profiles is checked by the hub on top of this).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from enum import Enum
from typing import Any


class State(Enum):
    QUEUED = "queued"
    DELIVERED = "delivered"
    ENDED = "ended"


class Event(Enum):
    DELIVER = "deliver"
    RESULT = "result"
    EXPIRE = "expire"
    OFFLINE = "offline"
    CANCEL = "cancel"


TRANSITIONS: dict[State, dict[Event, State]] = {
    State.QUEUED: {
        Event.DELIVER: State.DELIVERED,
        Event.RESULT: State.ENDED,
        Event.EXPIRE: State.ENDED,
        Event.OFFLINE: State.ENDED,
        Event.CANCEL: State.ENDED,
    },
    State.DELIVERED: {
        Event.DELIVER: State.DELIVERED,
        Event.RESULT: State.ENDED,
        Event.EXPIRE: State.ENDED,
        Event.OFFLINE: State.ENDED,
        Event.CANCEL: State.ENDED,
    },
    State.ENDED: {},  # everything after the end is ignored
}


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


OFFLINE = Outcome.failure(503, "runner_offline", "runner offline")
UNCERTAIN = Outcome.failure(504, "runner_command_uncertain", "runner command outcome uncertain")
NOT_ADMITTED = Outcome.failure(409, "runner_command_not_admitted", "channel closed")


def outcome_from_result(body: dict[str, Any], max_text: int = 1000) -> Outcome:
    """Map a runner's ``result`` body to the caller's outcome (error → 502, whatever code)."""
    if "error" in body and body["error"] is not None:
        err = body["error"]
        message = err.get("message") if isinstance(err, dict) else None
        code = err.get("code") if isinstance(err, dict) else None
        if not isinstance(message, str):
            message = "runner error"
        if not isinstance(code, str) or not code:
            code = "runner_error"
        return Outcome.failure(502, code, message[:max_text])
    return Outcome.success(body.get("result"))


@dataclass
class Lifecycle:
    """One command's state; ``apply`` returns False when the event is ignored."""

    state: State = State.QUEUED
    deliveries: int = 0
    history: list[Event] = field(default_factory=list)

    def apply(self, event: Event) -> bool:
        nxt = TRANSITIONS[self.state].get(event)
        if nxt is None:
            return False
        self.state = nxt
        self.history.append(event)
        if event is Event.DELIVER:
            self.deliveries += 1
        return True

    @property
    def ended(self) -> bool:
        return self.state is State.ENDED


def wire_json(command: dict[str, Any]) -> bytes:
    """The command's compact JSON (UTF-8), exactly as a poll answer carries it."""
    return json.dumps(command, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


class Wire(dict[str, Any]):
    """A delivered command ``{id,kind,payload,expiresAt}`` that remembers its JSON, serialised
    once at enqueue (for the size limits) and spliced into every poll answer that carries it."""

    __slots__ = ("json",)

    def __init__(self, command: dict[str, Any]) -> None:
        super().__init__(command)
        self.json = wire_json(self)


def poll_json(epoch: str, commands: list[dict[str, Any]]) -> bytes | None:
    """The poll answer's JSON built from pre-serialised commands (None if any is not a ``Wire``);
    byte-for-byte what ``json.dumps`` of ``{"epoch","commands"}`` gives."""
    parts = []
    for c in commands:
        if not isinstance(c, Wire):
            return None
        parts.append(c.json)
    head = json.dumps(epoch, ensure_ascii=False).encode("utf-8")
    return b'{"epoch":' + head + b',"commands":[' + b",".join(parts) + b"]}"
