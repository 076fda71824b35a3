"""The hub's in-memory state per runner: online states, the queue, channels, leases, polls.

Rules:
- An online state belongs to one instance and carries the epoch ``<hub-uuid>:<state-uuid>``
  and the features of THAT state (a new state starts with ``[]``; upstream keeps features on
  the online state, not on the runner record).
- ``Slot.pulse`` is replaced (after being set) on every change a harness may await: an online
  state made or dropped, a poll held or released.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from .artifacts import ArtifactUploads
from .handles import Channel, Command, Lease


@dataclass
class Online:
    instance: str
    epoch: str
    seen: float
    features: tuple[str, ...] = ()


class Waiter:
    """A held poll."""

    def __init__(self) -> None:
        self.event = asyncio.Event()
        self.superseded = False

    def wake(self) -> None:
        self.event.set()


@dataclass
class Slot:
    """Everything the hub holds in memory for one runner."""

    runner_id: str
    online: Online | None = None
    retired: set[str] = field(default_factory=set)
    queue: dict[str, Command] = field(default_factory=dict)
    channels: dict[str, Channel] = field(default_factory=dict)
    leases: dict[str, Lease] = field(default_factory=dict)
    waiter: Waiter | None = None
    uploads: ArtifactUploads = field(default_factory=ArtifactUploads)
    epochs: list[str] = field(default_factory=list)
    disconnects: list[str] = field(default_factory=list)
    pulse: asyncio.Event = field(default_factory=asyncio.Event)
    queued_bytes: int = 0  # sum of ``size`` over ``queue``; kept by ``Hub`` on add and end

    @property
    def online_changed(self) -> asyncio.Event:
        return self.pulse

    def changed(self) -> None:
        self.pulse.set()
        self.pulse = asyncio.Event()

    def set_waiter(self, waiter: Waiter | None) -> None:
        self.waiter = waiter
        self.changed()

    def wake(self) -> None:
        if self.waiter is not None:
            self.waiter.wake()
