"""Fault controls the harness arms on the machine API (the harness's simulated network).

Rules:
- A fault is armed for a route (``"*"``: every route) and ``n`` requests: ``fail`` answers
  ``status``/``code``, ``drop`` aborts the connection without an answer, ``delay`` sleeps on
  the control-plane clock first. Route faults apply before any gate runs.
- A fault with a ``target`` (a command id, connection id, lease id or call id) applies only to
  a request whose body names it, once that body is read (after the gates): "fail the next
  ``result`` of command X".
- ``duplicate_deliveries`` delivers the next ``n`` commands twice (same batch, or next poll).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from . import codes


@dataclass
class Fault:
    kind: str  # "fail" | "drop" | "delay"
    remaining: int
    status: int = codes.SERVICE_UNAVAILABLE.status
    code: str = codes.SERVICE_UNAVAILABLE.code
    seconds: float = 0.0
    target: str | None = None


@dataclass
class Faults:
    """``route`` is a machine-API route name, or ``"*"`` for every route."""

    armed: dict[str, list[Fault]] = field(default_factory=dict)
    duplicates_batch: int = 0
    duplicates_next_poll: int = 0

    def fail_next(self, route: str, n: int = 1, status: int = codes.SERVICE_UNAVAILABLE.status,
                  code: str = codes.SERVICE_UNAVAILABLE.code,
                  *, target: str | None = None) -> None:
        self.armed.setdefault(route, []).append(Fault("fail", n, status=status, code=code, target=target))

    def drop_next(self, route: str, n: int = 1, *, target: str | None = None) -> None:
        self.armed.setdefault(route, []).append(Fault("drop", n, target=target))

    def delay_next(self, route: str, n: int = 1, seconds: float = 1.0, *, target: str | None = None) -> None:
        self.armed.setdefault(route, []).append(Fault("delay", n, seconds=seconds, target=target))

    def duplicate_deliveries(self, n: int = 1, *, mode: str = "batch") -> None:
        """Deliver the next ``n`` commands twice: in the same batch, or again on the next poll."""
        if mode == "batch":
            self.duplicates_batch += n
        elif mode == "next_poll":
            self.duplicates_next_poll += n
        else:
            raise ValueError("mode must be 'batch' or 'next_poll'")

    def expire_now(self, handle: Any) -> None:
        """End a queued command by its deadline now (kept for old callers: ``handle.expire()``)."""
        handle.expire()

    def clear(self) -> None:
        self.armed.clear()
        self.duplicates_batch = self.duplicates_next_poll = 0

    def take(self, route: str, targets: tuple[str | None, ...] | None = None) -> Fault | None:
        """Consume one armed fault for ``route`` (specific route first, then ``"*"``).

        ``targets`` None: untargeted faults only (before the gates); else targeted faults whose
        target is among ``targets`` (after the body is read)."""
        for key in (route, "*"):
            queue = self.armed.get(key)
            if not queue:
                continue
            for fault in list(queue):
                if fault.remaining <= 0:
                    queue.remove(fault)
                    continue
                if targets is None and fault.target is not None:
                    continue
                if targets is not None and (fault.target is None or fault.target not in targets):
                    continue
                fault.remaining -= 1
                if fault.remaining <= 0:
                    queue.remove(fault)
                return fault
        return None
