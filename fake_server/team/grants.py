"""The async edge of the team world: grants (one per administrator session) whose handlers
execute the calls a runner relays through the ``tool`` route, and the delivery of reports back
into the originating session.

Rules:
- ``TeamDesk`` owns one ``TeamWorld`` and one ``asyncio.Lock``; every execution holds the lock
  around ``TeamWorld.apply`` (one step at a time per world: no lost update, whatever the grants).
- A grant is ``(admin, tag, origin session, profiles)``. Its catalogue (``catalogue(tag)``) has
  names and real ids of its own, and its handlers accept only its own ids: a call of another
  grant's id is ``team_tool_unknown``. The world is shared: both administrators see one workspace.
- Revoking a grant (``TeamDesk.revoke``) marks it revoked and drops its hub lease: calls not yet
  executed — including one held or waiting for the lock at that moment — are refused with 403
  ``team_grant_revoked`` (403, not 410: a 410 makes the runner dispose the lease at once) or, once
  the hub lease is gone, the hub's 410 ``runner_lease_expired``; nothing executes after.
- Reports are delivered as ``gateway.rpc prompt.submit {session_id, text}`` on the channel of
  the grant whose session the task came from. Deliver when that session is idle: Hermes 0.19.0
  queues a prompt sent during a turn and interrupts the running turn.
- Counters (``GrantStats``) let a test compare what reached the world with every other hop.
"""
from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

from fake_server.handles import ToolError

from . import codes as tc
from .catalogue import catalogue, op_of
from .codes import TeamError
from .world import Actor, Origin, Report, TeamWorld

if TYPE_CHECKING:
    from fake_server.commands import Outcome
    from fake_server.control import ControlPlane
    from fake_server.history import Exchange
    from fake_server.hub import Channel, Lease


@dataclass
class GrantStats:
    calls: int = 0          # relayed calls that reached this grant's handler
    executed: int = 0       # of which changed the world
    replayed: int = 0       # answered again for a repeated request id
    refused: int = 0        # answered with an error (world refusal, revoked, unknown id)
    read: int = 0           # reads (get_task)


class Hold:
    """Holds a grant's next call of one operation just before it would execute."""

    def __init__(self) -> None:
        self.reached = asyncio.Event()
        self._released = asyncio.Event()

    def release(self) -> None:
        self._released.set()

    async def wait(self) -> None:
        self.reached.set()
        await self._released.wait()


@dataclass
class Delivery:
    report: Report
    outcome: Outcome


@dataclass
class TeamGrant:
    desk: TeamDesk
    actor: Actor
    tag: str
    tools: list[dict[str, Any]]
    stats: GrantStats = field(default_factory=GrantStats)
    revoked: bool = False
    lease: Lease | None = None
    channel: Channel | None = None
    holds: dict[str, Hold] = field(default_factory=dict)
    answers: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    @property
    def handlers(self) -> dict[str, Any]:
        return {t["id"]: self.handle for t in self.tools}

    def hold(self, op: str) -> Hold:
        """Hold the next call of ``op`` before it executes (until ``release()`` or revocation)."""
        h = self.holds[op] = Hold()
        return h

    async def handle(self, tool_id: str, arguments: dict[str, Any]) -> dict[str, Any]:
        self.stats.calls += 1
        try:
            op = op_of(self.tag, tool_id)
            self._check_live()
            hold = self.holds.get(op.name)
            if hold is not None and not hold.reached.is_set():
                await hold.wait()
            async with self.desk.lock:
                self._check_live()  # revoked while held or while waiting for the lock
                world = self.desk.world
                before = world.replays, world.executions
                answer = world.apply(self.actor, op.name, arguments)
                if not op.mutates:
                    self.stats.read += 1
                elif world.replays > before[0]:
                    self.stats.replayed += 1
                elif world.executions > before[1]:
                    self.stats.executed += 1
        except TeamError as e:
            self.stats.refused += 1
            raise ToolError(e.status, e.code, e.message) from None
        self.answers.append((op.name, answer))
        return answer

    def _check_live(self) -> None:
        if self.revoked:
            raise TeamError(tc.TEAM_GRANT_REVOKED)


def _answered(seq: int, ex: Exchange) -> bool:
    return ex.seq == seq and ex.answered


class TeamDesk:
    """One team world, its lock and the grants onto it."""

    def __init__(self, world: TeamWorld | None = None) -> None:
        self.world = world or TeamWorld()
        self.lock = asyncio.Lock()
        self.grants: dict[str, TeamGrant] = {}
        self.deliveries: list[Delivery] = []
        self._revoking: set[asyncio.Future[None]] = set()  # hub leases dropped after in-flight calls

    def grant(self, admin: str, tag: str, origin: Origin,
              profiles: frozenset[str] | set[str] = frozenset({"default"})) -> TeamGrant:
        if tag in self.grants:
            raise ValueError("grant tag in use")
        g = TeamGrant(self, Actor(admin, origin, frozenset(profiles)), tag, catalogue(tag))
        self.grants[tag] = g
        return g

    async def lease(self, cp: ControlPlane, ch: Channel, grant: TeamGrant, *, profile: str,
                    **extra: Any) -> Lease:
        """``lease.create`` for the grant on ``ch`` (the session of the grant's origin)."""
        o = grant.actor.origin
        lease = await cp.create_lease(
            ch, profile=profile, session={"runtimeId": o.session_id, "storedId": o.stored_session_id},
            tools=grant.tools, handlers=grant.handlers, **extra)
        grant.lease, grant.channel = lease, ch
        return lease

    def revoke(self, cp: ControlPlane | None, grant: TeamGrant) -> None:
        """Stop the grant now: nothing of it executes after this returns.

        The hub lease goes once the grant's ``tool`` calls in flight now are answered: the hub
        asserts the lease active after a call too (upstream's ``assertActive``), which would turn
        a held call's 403 ``team_grant_revoked`` into a 410 and make the runner dispose the lease
        before the next call shows the 410 of a dropped lease."""
        grant.revoked = True
        for hold in grant.holds.values():
            hold.release()
        if cp is None or grant.lease is None:
            return
        lease = grant.lease
        in_flight = [ex.seq for ex in cp.history.filter(route="tool")
                     if ex.lease_id == lease.lease_id and not ex.answered]
        if not in_flight:
            cp.revoke_lease(lease)
            return

        async def drop_when_answered() -> None:
            try:
                for seq in in_flight:
                    await cp.history.wait_for(partial(_answered, seq), timeout=30.0,
                                              after_seq=seq - 1)
            except TimeoutError:
                pass  # never answered (the runner went away): drop the lease all the same
            finally:
                cp.revoke_lease(lease)

        task = asyncio.ensure_future(drop_when_answered())
        self._revoking.add(task)
        task.add_done_callback(self._revoking.discard)

    def channel_of(self, session_id: str) -> Channel | None:
        for g in self.grants.values():
            if g.actor.origin.session_id == session_id and g.channel is not None:
                return g.channel
        return None

    async def deliver_reports(self, cp: ControlPlane) -> list[Delivery]:
        """Send every pending report into its originating session (``prompt.submit``)."""
        sent: list[Delivery] = []
        for report in self.world.take_reports():
            ch = self.channel_of(report.origin.session_id)
            if ch is None:  # the originating session has no channel any more: keep it
                self.world.outbox.append(report)
                continue
            outcome = await cp.rpc(ch, "prompt.submit", {"session_id": report.origin.session_id,
                                                         "text": report.text})
            sent.append(Delivery(report, outcome))
        self.deliveries.extend(sent)
        return sent
