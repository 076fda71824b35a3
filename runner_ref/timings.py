"""Every timing and limit the runner uses, and its one clock.

Rules:
- Protocol timings are module constants with the values of protocol 1.
- Tests may override a timing only through an environment variable named
  ``RUNNER_REF_TEST_<NAME>`` (seconds, a float). Vendors never need them; our own tests do,
  so they run in seconds instead of minutes.
- Wall-clock time is read only through :func:`now_ms` so the ledger's 1 h retirement can be
  moved with ``faketime`` (libfaketime patches ``time.time``).
"""
from __future__ import annotations

import os
import time

_PREFIX = "RUNNER_REF_TEST_"


def _seconds(name: str, default: float) -> float:
    raw = os.environ.get(_PREFIX + name)
    if raw is None:
        return default
    try:
        value = float(raw)
    except ValueError:
        return default
    return value if value >= 0 else default


RECONNECT_DELAY = _seconds("RECONNECT_DELAY", 1.0)
REQUEST_TIMEOUT = _seconds("REQUEST_TIMEOUT", 25.0)
POLL_TIMEOUT = _seconds("POLL_TIMEOUT", 25.0)
HERMES_TIMEOUT = _seconds("HERMES_TIMEOUT", 25.0)
TOMBSTONE_TTL = _seconds("TOMBSTONE_TTL", 60.0)
INTERRUPT_WAIT = _seconds("INTERRUPT_WAIT", 3.0)
RETIRE_AFTER = _seconds("RETIRE_AFTER", 3600.0)
SHUTDOWN_DRAIN = _seconds("SHUTDOWN_DRAIN", 10.0)

RETIRE_EVERY_COMMANDS = 256
RESPONSE_CAP = 40 * 1024 * 1024
HERMES_BODY_CAP = 8 * 1024 * 1024
HERMES_PAGE_CAP = 2 * 1024 * 1024
ERROR_TEXT_CAP = 1000
SERVER_ERROR_CAP = 300
MAX_CHANNELS = 64
MAX_LEASES = 64


def now_ms() -> int:
    """Wall-clock milliseconds since the epoch (the only wall-clock read in the runner)."""
    return int(time.time() * 1000)
