"""Simulated Yaoyao control plane speaking Runner protocol 1 (the oracle).

``from fake_server import ControlPlane, Timings, ManualClock, SystemClock, Outcome`` — see
docs/harness-api.md. This package shares no code with ``runner_ref``.
"""

from .clock import Clock, ManualClock, SystemClock
from .commands import Outcome
from .control import CommandFailed, ControlPlane, Registration
from .faults import Faults
from .history import Exchange, History
from .hub import Channel, Command, Lease, ToolError
from .store import AccountRecord, RunnerRecord, SourceRecord, Store, StoreError
from .timings import Limits, Timings

__all__ = [
    "AccountRecord", "Channel", "Clock", "Command", "CommandFailed", "ControlPlane", "Exchange",
    "Faults", "History", "Lease", "Limits", "ManualClock", "Outcome", "Registration",
    "RunnerRecord", "SourceRecord", "Store", "StoreError", "SystemClock", "Timings", "ToolError",
]
