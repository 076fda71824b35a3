"""Wiring to the team tools' :class:`LeaseManager` (``runner_ref/teamtools/leases.py``).

Until that module is importable, a stand-in answers every lease kind with 409
``team_tools_unavailable`` and disposes nothing, behind the same interface.
"""
from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from .errors import CommandError

Relay = Callable[[str, str, dict[str, Any], str], Awaitable[Any]]


class Leases(Protocol):
    async def create(self, payload: dict[str, Any]) -> dict[str, Any]: ...
    async def bind(self, payload: dict[str, Any]) -> dict[str, Any]: ...
    async def close(self, payload: dict[str, Any]) -> dict[str, Any]: ...
    async def dispose_channel(self, connection_id: str) -> None: ...
    async def dispose_all(self) -> None: ...
    def on_session_info(self, runtime_id: str, stored_id: str) -> None: ...


class UnavailableLeases:
    """The stand-in used when ``runner_ref.teamtools.leases`` is missing."""

    async def create(self, payload: dict[str, Any]) -> dict[str, Any]:
        raise CommandError("team_tools_unavailable", "team tools are not available", 409)

    async def bind(self, payload: dict[str, Any]) -> dict[str, Any]:
        raise CommandError("runner_lease_expired", "unknown lease", 410)

    async def close(self, payload: dict[str, Any]) -> dict[str, Any]:
        return {"ok": True}

    async def dispose_channel(self, connection_id: str) -> None:
        return None

    async def dispose_all(self) -> None:
        return None

    def on_session_info(self, runtime_id: str, stored_id: str) -> None:
        return None


def make_lease_manager(relay: Any, plugin: Any, sessions: Any) -> Leases:
    try:
        from .teamtools.leases import LeaseManager
    except ImportError:
        return UnavailableLeases()
    manager: Leases = LeaseManager(relay=relay, plugin=plugin, sessions=sessions)
    return manager
