"""What the admin API needs from the control plane, and nothing more (no facade import).

The control plane builds one ``AdminDeps`` per app (a restart builds a new app, so ``store`` is
the store of that run); ``own_origin`` is read per request because the port is known only once
the socket is bound.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from .clock import Clock
from .store import Store
from .timings import Timings


@dataclass(frozen=True)
class AdminDeps:
    store: Store
    clock: Clock
    own_origin: Callable[[], str]  # e.g. "http://127.0.0.1:8123"
    is_online: Callable[[str], bool]  # runner id → online now
    disable_runner: Callable[[str], Awaitable[bool]]  # record kept, hub disconnect at once
    timings: Timings
