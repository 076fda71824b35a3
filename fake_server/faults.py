"""Fault controls the harness arms on the machine API (applied before any gate runs)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Fault:
    kind: str  # "fail" | "drop" | "delay"
    remaining: int
    status: int = 503
    code: str = "service_unavailable"
    seconds: float = 0.0


@dataclass
class Faults:
    """``route`` is a machine-API route name, or ``"*"`` for every route."""

    armed: dict[str, list[Fault]] = field(default_factory=dict)
    duplicates_batch: int = 0
    duplicates_next_poll: int = 0
    _expire: Any = None  # set by the ControlPlane: callable(handle) -> None

    def fail_next(self, route: str, n: int = 1, status: int = 503, code: str = "service_unavailable") -> None:
        self.armed.setdefault(route, []).append(Fault("fail", n, status=status, code=code))

    def drop_next(self, route: str, n: int = 1) -> None:
        self.armed.setdefault(route, []).append(Fault("drop", n))

    def delay_next(self, route: str, n: int = 1, seconds: float = 1.0) -> None:
        self.armed.setdefault(route, []).append(Fault("delay", n, seconds=seconds))

    def duplicate_deliveries(self, n: int = 1, *, mode: str = "batch") -> None:
        """Deliver the next ``n`` commands twice: in the same batch, or again on the next poll."""
        if mode == "batch":
            self.duplicates_batch += n
        elif mode == "next_poll":
            self.duplicates_next_poll += n
        else:
            raise ValueError("mode must be 'batch' or 'next_poll'")

    def expire_now(self, handle: Any) -> None:
        """End a queued command by its deadline now (caller gets 504 runner_command_uncertain)."""
        if self._expire is not None:
            self._expire(handle)

    def clear(self) -> None:
        self.armed.clear()
        self.duplicates_batch = self.duplicates_next_poll = 0

    def take(self, route: str) -> Fault | None:
        """Consume one armed fault for ``route`` (specific route first, then ``"*"``)."""
        for key in (route, "*"):
            queue = self.armed.get(key)
            while queue:
                fault = queue[0]
                if fault.remaining <= 0:
                    queue.pop(0)
                    continue
                fault.remaining -= 1
                if fault.remaining <= 0:
                    queue.pop(0)
                return fault
        return None
