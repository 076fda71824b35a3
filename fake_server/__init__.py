"""Simulated Yaoyao control plane speaking Runner protocol 1 (the oracle).

``from fake_server import ControlPlane, Timings, ManualClock, SystemClock, Outcome`` — see
docs/harness-api.md. This package shares no code with ``runner_ref``.
"""

from .admin_deps import AdminDeps
from .clock import Clock, ManualClock, SystemClock
from .faults import Faults
from .handles import Channel, Command, CommandRefused, Lease, ToolError
from .history import Exchange, History
from .lifecycle import Outcome, State, Step
from .lifecycle_log import Fact, LifecycleLog
from .machine_api import MachineDeps
from .plane import ControlPlane
from .records import AccountRecord, RunnerRecord, SourceRecord, StoreError
from .registration import Registration
from .store import Store
from .timings import Extras, Limits, Timings
from .verbs import CommandFailed

__all__ = [
    "AccountRecord", "AdminDeps", "Channel", "Clock", "Command", "CommandFailed", "CommandRefused",
    "ControlPlane", "Exchange", "Extras", "Fact", "Faults", "History", "Lease", "LifecycleLog", "Limits",
    "MachineDeps", "ManualClock", "Outcome", "Registration", "RunnerRecord", "SourceRecord", "State",
    "Step", "Store", "StoreError", "SystemClock", "Timings", "ToolError",
]
