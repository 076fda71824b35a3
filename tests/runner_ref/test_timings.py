"""``runner_ref/timings.py`` is the one source of the runner's timings, limits and UUID format."""
from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from runner_ref import timings
from runner_ref.gateway import Gateways
from runner_ref.teamtools.leases import LeaseManager

PACKAGE = Path(timings.__file__).resolve().parent


def test_one_uuid_pattern() -> None:
    holders = sorted(str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py")
                     if "[0-9a-fA-F]{8}" in p.read_text())
    assert holders == ["timings.py"]
    assert timings.UUID_RE.match(str(uuid.uuid4()))
    assert not timings.UUID_RE.match(str(uuid.uuid4())[:-1])


class _NoSessions:
    def owner_of(self, runtime_id: str) -> tuple[str, str] | None:
        return None

    def stored_id(self, runtime_id: str) -> str | None:
        return None


async def test_channels_and_leases_share_one_tombstone_time(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Both tombstones read ``TOMBSTONE_TTL`` (there were two 60 s constants)."""
    monkeypatch.setattr(timings, "TOMBSTONE_TTL", 7.0)
    now = [100.0]

    async def post(body: dict[str, Any]) -> None:
        return None

    async def relay(lease_id: str, tool_id: str, arguments: dict[str, Any], call_id: str) -> None:
        return None

    class Plugin:
        async def post_json(self, path: str, body: dict[str, Any]) -> tuple[int, Any]:
            return 200, {"ok": True}

    gw = Gateways(None, ("default",), post, lambda: None,  # type: ignore[arg-type]
                  clock=lambda: now[0])
    leases = LeaseManager(relay=relay, plugin=Plugin(), sessions=_NoSessions(),
                          clock=lambda: now[0], auto_renew=False)
    lease_id = str(uuid.uuid4())
    assert await gw.close({"connectionId": "c"}) == {"ok": True}
    assert await leases.close({"leaseId": lease_id}) == {"ok": True}
    now[0] += 6.9
    assert gw.is_tombstoned("c") and leases.is_tombstoned(lease_id)
    now[0] += 0.2
    assert not gw.is_tombstoned("c") and not leases.is_tombstoned(lease_id)


def test_team_tool_defaults_come_from_timings() -> None:
    from runner_ref.teamtools.call_book import CallBook
    from runner_ref.teamtools.listener import ListenerTimings
    lt = ListenerTimings()
    assert (lt.request, lt.keepalive, lt.max_headers, lt.shutdown) == (
        timings.LISTENER_REQUEST_TIMEOUT, timings.LISTENER_KEEPALIVE,
        timings.LISTENER_MAX_HEADERS, timings.LISTENER_SHUTDOWN) == (15.0, 1.0, 30, 1.0)
    assert CallBook().limit == timings.MAX_CALLS == 128
    m = LeaseManager(relay=None, plugin=None, sessions=_NoSessions(),  # type: ignore[arg-type]
                     auto_renew=False)
    assert (m.ttl, m.renew_every, m._plugin_timeout) == (
        timings.LEASE_TTL, timings.LEASE_RENEW_EVERY, timings.PLUGIN_TIMEOUT) == (1800, 300, 10)
