"""Wire encoding of delivered commands (the HTTP edge): compact JSON, serialised once.

Rules:
- A command travels as ``{id,kind,payload,expiresAt}`` in compact JSON (UTF-8, no ASCII escaping).
- It is serialised once, at enqueue (the size limits measure exactly these bytes), and the poll
  answer splices the stored bytes; the result is byte-for-byte ``json.dumps`` of the answer.
"""

from __future__ import annotations

import json
from typing import Any


def wire_json(command: dict[str, Any]) -> bytes:
    """The command's compact JSON (UTF-8), exactly as a poll answer carries it."""
    return json.dumps(command, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


class Wire(dict[str, Any]):
    """A delivered command ``{id,kind,payload,expiresAt}`` that remembers its JSON."""

    __slots__ = ("json",)

    def __init__(self, command: dict[str, Any]) -> None:
        super().__init__(command)
        self.json = wire_json(self)


def poll_json(epoch: str, commands: list[dict[str, Any]]) -> bytes | None:
    """The poll answer's JSON built from pre-serialised commands (None if any is not a ``Wire``)."""
    parts = []
    for c in commands:
        if not isinstance(c, Wire):
            return None
        parts.append(c.json)
    head = json.dumps(epoch, ensure_ascii=False).encode("utf-8")
    return b'{"epoch":' + head + b',"commands":[' + b",".join(parts) + b"]}"
