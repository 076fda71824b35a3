"""``AdminDeps``: what the admin API reads, handed to ``setup_admin(app, deps)`` (no façade).

One hub lifetime's concrete objects (rebuilt with the app on every restart), so the admin
handlers import nothing of the control plane.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from .clock import Clock
from .history import History
from .store import Store
from .timings import Timings


@dataclass(frozen=True)
class AdminDeps:
    store: Store
    clock: Clock
    url: str  # the control plane's own origin, ``http://host:port``
    is_online: Callable[[str], bool]
    disable_runner: Callable[[str], Awaitable[bool]]
    timings: Timings
    history: History
    features: Callable[[str], list[str]]  # the live online state's features ([] offline)

    @property
    def own_origin(self) -> str:
        return self.url
