"""Errors the runner reports as command results (``{"error": {"message", "code"}}``)."""
from __future__ import annotations

from typing import Any

from .timings import ERROR_TEXT_CAP


def error_reply(code: str, message: str) -> dict[str, Any]:
    """The coded error result ``{"error": {"message", "code"}}``, the message capped."""
    return {"error": {"message": message[:ERROR_TEXT_CAP], "code": code}}


class CommandError(Exception):
    """A coded failure of one command. ``status`` is informational: the control plane
    shows every runner error to its caller as 502 with ``code`` (protocol 1)."""

    def __init__(self, code: str, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.status = status

    def to_result(self) -> dict[str, Any]:
        return error_reply(self.code, self.message)


class ServerError(Exception):
    """A non-2xx answer from the control plane's machine API."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
