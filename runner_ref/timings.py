"""Every timing and limit the runner uses, its one clock and its one UUID format.

Rules:
- Protocol timings and limits are module constants with the values of protocol 1; no other
  module of ``runner_ref`` holds a number of its own for them (the team tools included).
- Tests may override a timing only through an environment variable named
  ``RUNNER_REF_TEST_<NAME>`` (seconds, a float). Vendors never need them; our own tests do,
  so they run in seconds instead of minutes.
- Wall-clock time is read only through :func:`now_ms` so the ledger's 1 h retirement can be
  moved with ``faketime`` (libfaketime patches ``time.time``).
The limits the control plane also enforces (64 channels, 64 leases, 128 calls, the listener's
limits, the tombstone time, the UUID format) are written independently in fake_server on
purpose.
"""
from __future__ import annotations

import os
import re
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
TOMBSTONE_TTL = _seconds("TOMBSTONE_TTL", 60.0)   # closed channel and lease ids, both
INTERRUPT_WAIT = _seconds("INTERRUPT_WAIT", 3.0)
RETIRE_AFTER = _seconds("RETIRE_AFTER", 3600.0)
SHUTDOWN_DRAIN = _seconds("SHUTDOWN_DRAIN", 10.0)
CLOSE_GRACE = 0.5            # the socket close may take this long after the interrupt budget
TOOL_RELAY_LONG_TIMEOUT = 600.0   # a ``tool`` relay of a managed-browser or credential tool

# team tool leases (§6)
LEASE_TTL = 1800.0           # a lease expires this long after its last create/bind/renewal
LEASE_RENEW_EVERY = 300.0
PLUGIN_TIMEOUT = 10.0        # a bind/unbind request to the Hermes plugin
# the loopback listener (§5, §6)
LISTENER_REQUEST_TIMEOUT = 15.0
LISTENER_KEEPALIVE = 1.0
LISTENER_MAX_HEADERS = 30
LISTENER_SHUTDOWN = 1.0
LISTENER_MAX_BODY = 256 * 1024
LISTENER_MAX_DEPTH = 30      # JSON nesting, the body object being level 1
MAX_CALLS = 128              # distinct callIds per lease
MAX_TOOL_ID = 100
MAX_CALL_ID = 200

RETIRE_EVERY_COMMANDS = 256
RESPONSE_CAP = 40 * 1024 * 1024
HERMES_BODY_CAP = 8 * 1024 * 1024
HERMES_PAGE_CAP = 2 * 1024 * 1024
ERROR_TEXT_CAP = 1000
SERVER_ERROR_CAP = 300
MAX_CHANNELS = 64
MAX_LEASES = 64
SEARCH_MAX = 8192            # the ``http`` kind's ``search`` string

#: The one UUID format (runnerId, leaseId).
UUID_RE = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")


def now_ms() -> int:
    """Wall-clock milliseconds since the epoch (the only wall-clock read in the runner)."""
    return int(time.time() * 1000)
