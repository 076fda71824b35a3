"""Every timing and limit of the simulated control plane, configurable for fast tests."""

from __future__ import annotations

from dataclasses import dataclass

MIB = 1024 * 1024


@dataclass(frozen=True)
class Timings:
    """Seconds. Defaults are protocol 1's."""

    poll_hold: float = 15.0
    redelivery: float = 5.0
    watchdog_tick: float = 5.0
    offline_after: float = 35.0
    command_deadline: float = 30.0
    bind_deadline: float = 70.0
    extract_deadline: float = 120.0
    admin_session_ttl: float = 12 * 3600.0
    artifact_orphan_after: float = 300.0  # ours: idle uploads dropped by the watchdog sweep


@dataclass(frozen=True)
class Limits:
    """Sizes and counts. Defaults are protocol 1's."""

    pending_commands: int = 64
    queued_bytes: int = 64 * MIB
    single_command: int = 36 * MIB
    poll_batch: int = 38 * MIB
    request_body: int = 16 * MIB
    desktop_body: int = 40 * MIB
    retired_instances: int = 256
    tool_calls_per_lease: int = 128
    # Harness extras (upstream has no server-side cap, the 65th reaches the runner): a number
    # refuses the next channel/lease at the caller with 429 runner_busy. Off (None) by default.
    channels_per_runner: int | None = None
    leases_per_runner: int | None = None
    artifact_size: int = 25 * MIB
    artifact_chunk: int = 1 * MIB
    artifacts_per_channel: int = 8
    artifact_unfinished: int = 64 * MIB
    result_error_text: int = 1000


@dataclass(frozen=True)
class Extras:
    """Harness behaviours upstream lacks; every one is off by default (docs/harness-api.md)."""

    admit_checks_profile: bool = False  # admit re-checks the command's profile (upstream: no)
