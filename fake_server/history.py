"""The history: every machine-API exchange, in arrival order, readable by tests."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any


def digest(raw: bytes | None) -> str | None:
    return None if raw is None else hashlib.sha256(raw).hexdigest()


@dataclass
class Exchange:
    """One machine-API request and its answer (``status`` None: dropped without an answer)."""

    seq: int
    time: float  # control-plane clock, seconds
    route: str
    method: str
    runner_id: str
    instance: str | None
    request_epoch: str | None
    reset: bool
    request_digest: str | None
    request_body: Any
    epoch: str | None = None  # the runner's server-side epoch when answered
    status: int | None = None
    code: str | None = None
    response_digest: str | None = None
    response_body: Any = None
    end_time: float | None = None
    fault: str | None = None

    @property
    def commands(self) -> list[dict[str, Any]]:
        """Commands delivered by this exchange (poll responses only)."""
        body = self.response_body
        if self.route == "poll" and isinstance(body, dict):
            cmds = body.get("commands")
            if isinstance(cmds, list):
                return [c for c in cmds if isinstance(c, dict)]
        return []


@dataclass
class History:
    entries: list[Exchange] = field(default_factory=list)

    def begin(self, **kw: Any) -> Exchange:
        ex = Exchange(seq=len(self.entries) + 1, **kw)
        self.entries.append(ex)
        return ex

    def __iter__(self) -> Iterator[Exchange]:
        return iter(list(self.entries))

    def __len__(self) -> int:
        return len(self.entries)

    def __getitem__(self, i: int) -> Exchange:
        return self.entries[i]

    def filter(
        self,
        *,
        route: str | None = None,
        runner_id: str | None = None,
        status: int | None = None,
        code: str | None = None,
        instance: str | None = None,
        where: Callable[[Exchange], bool] | None = None,
    ) -> list[Exchange]:
        out = []
        for ex in list(self.entries):
            if route is not None and ex.route != route:
                continue
            if runner_id is not None and ex.runner_id != runner_id:
                continue
            if status is not None and ex.status != status:
                continue
            if code is not None and ex.code != code:
                continue
            if instance is not None and ex.instance != instance:
                continue
            if where is not None and not where(ex):
                continue
            out.append(ex)
        return out

    def deliveries(self, command_id: str) -> list[Exchange]:
        """Polls whose answer carried ``command_id``."""
        return [ex for ex in self.filter(route="poll") if any(c.get("id") == command_id for c in ex.commands)]

    def codes(self, route: str | None = None) -> list[str | None]:
        return [ex.code for ex in self.filter(route=route)]

    def clear(self) -> None:
        self.entries.clear()
