"""The runner's two exceptions: a coded failure of one command, and a failure the control plane
answered. Codes, statuses and messages live in :mod:`runner_ref.codes`."""
from __future__ import annotations

from typing import Any

from .codes import Code, error_result


class CommandError(Exception):
    """A coded failure of one command. ``status`` is informational: the control plane
    shows every runner error to its caller as 502 with ``code`` (protocol 1)."""

    def __init__(self, code: str, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.status = status

    @classmethod
    def of(cls, row: Code, message: str | None = None) -> CommandError:
        """The failure of a row of :mod:`runner_ref.codes` (optionally a more precise message)."""
        return cls(row.code, row.message if message is None else message, row.status)

    def to_result(self) -> dict[str, Any]:
        return error_result(self.code, self.message)


class ServerError(Exception):
    """A non-2xx answer from the control plane's machine API (``status`` 0: no answer)."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message

    @classmethod
    def of(cls, row: Code, status: int | None = None, message: str | None = None) -> ServerError:
        return cls(row.status if status is None else status, row.code,
                   row.message if message is None else message)
