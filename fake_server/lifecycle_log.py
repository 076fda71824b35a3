"""The server-side lifecycle log: facts a checker joins with the history and the effect log.

Rules:
- One entry per fact, in the order it happened, each with a ``seq`` from the shared sequence
  (the same counter as the history's, and the scripted Hermes' when the harness passes one).
- Kinds (``FACT_KINDS``): queued, enqueue_refused (reason), delivered (exchange seq), admitted,
  admit_refused (reason), result (reason "result without admit" when no admit came first),
  ignored (a late or duplicate event, reason), expired, offline, cancelled (server-side channel
  close), revoked (what: channel | lease | account_authorization | account_active | profiles |
  runner_disabled), channel_closed (by), disconnected (reason, old epoch), epoch_changed
  (new epoch), instance_fenced (the retired instance).
- ``await log.wait_for(predicate, timeout=…)`` returns the first matching fact, past or future.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from .waiting import Waiters

FACT_KINDS = frozenset({
    "queued", "enqueue_refused", "delivered", "admitted", "admit_refused", "result", "ignored",
    "expired", "offline", "cancelled", "revoked", "channel_closed", "disconnected",
    "epoch_changed", "instance_fenced",
})


@dataclass(frozen=True)
class Fact:
    seq: int
    time: float
    kind: str
    runner_id: str
    command_id: str | None = None
    connection_id: str | None = None
    lease_id: str | None = None
    reason: str | None = None
    detail: dict[str, Any] = field(default_factory=dict)


class LifecycleLog:
    def __init__(self, sequence: Callable[[], int] | None = None) -> None:
        self.sequence = sequence or itertools.count(1).__next__
        self._entries: list[Fact] = []
        self._waiters: Waiters[Fact] = Waiters()

    def record(self, kind: str, runner_id: str, *, time: float, **kw: Any) -> Fact:
        if kind not in FACT_KINDS:
            raise ValueError(f"unknown fact kind {kind}")
        fact = Fact(self.sequence(), time, kind, runner_id, **kw)
        self._entries.append(fact)
        self._waiters.notify(fact)
        return fact

    @property
    def entries(self) -> list[Fact]:
        return list(self._entries)

    def clear(self) -> None:
        """Forget the kept facts (``seq`` keeps counting), as ``History.clear``."""
        self._entries.clear()

    def __iter__(self) -> Iterator[Fact]:
        return iter(list(self._entries))

    def __len__(self) -> int:
        return len(self._entries)

    def filter(
        self, kind: str | None = None, *, runner_id: str | None = None, command_id: str | None = None,
        connection_id: str | None = None, lease_id: str | None = None,
    ) -> list[Fact]:
        return [
            f for f in self._entries
            if (kind is None or f.kind == kind) and (runner_id is None or f.runner_id == runner_id)
            and (command_id is None or f.command_id == command_id)
            and (connection_id is None or f.connection_id == connection_id)
            and (lease_id is None or f.lease_id == lease_id)
        ]

    def kinds(self, command_id: str) -> list[str]:
        return [f.kind for f in self._entries if f.command_id == command_id]

    async def wait_for(
        self, predicate: Callable[[Fact], bool], timeout: float | None = 10.0, *, after_seq: int = 0
    ) -> Fact:
        return await self._waiters.wait_for(
            (f for f in list(self._entries) if f.seq > after_seq),
            lambda f: f.seq > after_seq and predicate(f), timeout,
        )
