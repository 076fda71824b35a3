"""Drive the acceptance scenario against one Hermes (scripted or real) through one runner under
test, and count the tool calls at every hop. Shared by both variants.

Rules:
- Everything goes model → Hermes plugin → the runner's loopback listener → the ``tool`` relay →
  the control plane's team world, and back; the harness only submits prompts, grants, revokes
  and delivers the report (``gateway.rpc prompt.submit`` into the originating session).
- Two administrators (accounts ``ana`` and ``ben``, a channel and a session each, a grant each)
  act at once in the first phase. Ben's grant is revoked while his next call is held in the
  control plane; the runner disposes the lease on the following 410 and unbinds the plugin.
- ``HermesSide`` is the only variant-specific part: how the model's calls, the plugin's forwards
  and the listener's answers are counted on that Hermes.
- No sleeps: events are awaited with a bound; polls go through ``poll_until``.
"""
from __future__ import annotations

import asyncio
import base64
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from fake_server import Channel, ControlPlane
from fake_server.team import Origin, TeamDesk, TeamGrant

from .scenario import ADMINS, ANA_1, BEN_1, BEN_2, BEN_3, BEN_4, PROFILE, Turn

NATIVE_PREFIX = "yaoyao_workspace_"


class HermesSide(Protocol):
    name: str
    #: Whether this Hermes marks the end of a turn (the session idle again) with a
    #: ``session.info`` after ``message.complete``. Real Hermes 0.19.0 does (``tui_gateway``
    #: emits it once ``running`` is cleared); a prompt sent before it is ``queued`` behind the
    #: ending turn and, in the default ``busy_input_mode``, interrupts it.
    idle_after_complete: bool

    def session_params(self) -> dict[str, Any]: ...
    async def hermes_hops(self) -> dict[str, int]:
        """``model_calls``, ``plugin_forwarded``, ``listener_answered`` on this Hermes."""
        ...
    async def unbinds(self) -> int: ...
    def report_seen(self, session_id: str, text: str) -> bool:
        """Whether Hermes took ``text`` as a prompt (of ``session_id`` where it can tell)."""
        ...


async def poll_until(check: Callable[[], Awaitable[bool]], timeout: float, what: str) -> None:
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while not await check():
        if loop.time() > end:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)  # poll interval of a bounded poll, not a wait for a condition


async def wait_event_at(ch: Channel, type_: str, sid: str, after: int, timeout: float
                        ) -> tuple[dict[str, Any], int]:
    """The first ``type_`` event of session ``sid`` at index ``after`` or later, and the index
    just past it. A timeout says what the session did see, so a hang is diagnosable."""
    loop = asyncio.get_running_loop()
    end, i = loop.time() + timeout, after
    while True:
        try:
            ev = await ch.next_event(type_, timeout=max(0.1, end - loop.time()), after=i)
        except TimeoutError:
            seen = [e.get("type") for e in ch.events[after:] if e.get("session_id") == sid]
            raise AssertionError(f"no {type_} of session {sid} within {timeout:.0f} s; "
                                 f"the session's events since: {seen}") from None
        i = next(k for k in range(i, len(ch.events)) if ch.events[k] is ev) + 1
        if ev.get("session_id") == sid:
            return ev, i


async def end_of_turn(side: HermesSide, ch: Channel, sid: str, after: int, timeout: float
                      ) -> dict[str, Any]:
    """``message.complete`` of the turn, then (where this Hermes says so) the session idle."""
    done, i = await wait_event_at(ch, "message.complete", sid, after, timeout)
    if side.idle_after_complete:
        await wait_event_at(ch, "session.info", sid, i, timeout)
    return done


@dataclass
class Admin:
    name: str
    ch: Channel
    sid: str
    stored: str
    grant: TeamGrant

    def events(self, type_: str) -> list[dict[str, Any]]:
        return [e for e in self.ch.events if e.get("type") == type_
                and e.get("session_id") == self.sid]


@dataclass
class Run:
    admins: dict[str, Admin]
    desk: TeamDesk
    hops: dict[str, int] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    texts: dict[str, str] = field(default_factory=dict)
    transcripts: dict[str, str] = field(default_factory=dict)   # stored messages, as JSON


async def turn(cp: ControlPlane, side: HermesSide, a: Admin, t: Turn, timeout: float) -> str:
    mark = len(a.ch.events)
    sent = await cp.rpc(a.ch, "prompt.submit", {"session_id": a.sid, "text": t.prompt})
    assert sent.ok and sent.result == {"status": "streaming"}, sent
    done = await end_of_turn(side, a.ch, a.sid, mark, timeout)
    assert done["payload"]["status"] == "complete", done
    return str(done["payload"].get("text") or "")


async def open_admin(cp: ControlPlane, runner_id: str, desk: TeamDesk, side: HermesSide,
                     name: str) -> Admin:
    ch = await cp.open_channel(runner_id, account=name, profile=PROFILE)
    made = await cp.rpc(ch, "session.create", {"profile": PROFILE, "title": f"admin {name}",
                                               "cols": 100, **side.session_params()})
    assert made.ok, made
    sid, stored = made.result["session_id"], made.result["stored_session_id"]
    grant = desk.grant(name, name, Origin(name, sid, stored), {PROFILE})
    await desk.lease(cp, ch, grant, profile=PROFILE)
    return Admin(name, ch, sid, stored, grant)


async def warm_up(cp: ControlPlane, runner_id: str, side: HermesSide, timeout: float) -> float:
    """One plain turn in a session of its own, through the runner, before the scenario.

    A real Hermes imports most of its agent lazily on the first turn; the scenario's first
    phase starts two first turns at once, so without this the measure would include two threads
    racing through Hermes' lazy imports, which is Hermes' start-up, not the protocol. The turn
    (a prompt no rule matches: the model's fallback text, no tools) leaves the team world and
    every hop count untouched. Returns its wall time."""
    t0 = time.monotonic()
    ch = await cp.open_channel(runner_id, account=ADMINS[0], profile=PROFILE)
    made = await cp.rpc(ch, "session.create", {"profile": PROFILE, "title": "warm-up",
                                               "cols": 100, **side.session_params()})
    assert made.ok, made
    sid, mark = made.result["session_id"], len(ch.events)
    sent = await cp.rpc(ch, "prompt.submit", {"session_id": sid, "text": "WARMUP say hello"})
    assert sent.ok, sent
    await end_of_turn(side, ch, sid, mark, timeout)
    assert (await cp.close_channel(ch)).ok
    return time.monotonic() - t0


async def run_scenario(cp: ControlPlane, runner_id: str, side: HermesSide,
                       timeout: float = 90.0) -> Run:
    t_start = time.monotonic()
    desk = TeamDesk()
    admins = {n: await open_admin(cp, runner_id, desk, side, n) for n in ADMINS}
    ana, ben = admins["ana"], admins["ben"]
    binds = await asyncio.gather(*(cp.bind_lease(a.grant.lease) for a in admins.values()
                                   if a.grant.lease is not None))
    assert all(b.ok for b in binds), binds
    run = Run(admins, desk)
    tool_route0 = len(cp.history.filter(route="tool"))
    hermes0 = await side.hermes_hops()
    run.timings["setup_s"] = time.monotonic() - t_start

    # Phase 1: both administrators at once.
    t0 = time.monotonic()
    run.texts["ANA1"], run.texts["BEN1"] = await asyncio.gather(
        turn(cp, side, ana, ANA_1, timeout), turn(cp, side, ben, BEN_1, timeout))
    # Phase 2: ben reviews and completes ana's task; the report goes back into ANA's session.
    run.texts["BEN2"] = await turn(cp, side, ben, BEN_2, timeout)
    mark = len(ana.ch.events)
    delivered = await desk.deliver_reports(cp)
    assert [d.outcome.ok for d in delivered] == [True], delivered
    done = await end_of_turn(side, ana.ch, ana.sid, mark, timeout)
    run.texts["REPORT"] = str(done["payload"].get("text") or "")
    # Phase 3: revoke ben's grant while his next call is held in the control plane.
    hold = ben.grant.hold("create_member")
    ben3 = asyncio.ensure_future(turn(cp, side, ben, BEN_3, timeout))
    await asyncio.wait_for(hold.reached.wait(), timeout)
    executed_at_revoke = desk.world.executions
    desk.revoke(cp, ben.grant)
    run.texts["BEN3"] = await ben3
    await poll_until(lambda: _unbound(side), timeout, "the runner to unbind ben's lease")
    # Phase 4: the model tries again; the tools are gone, nothing leaves Hermes.
    run.texts["BEN4"] = await turn(cp, side, ben, BEN_4, timeout)
    assert desk.world.executions == executed_at_revoke, "something executed after revocation"
    run.timings["turns_s"] = time.monotonic() - t0

    hermes1 = await side.hermes_hops()
    run.hops = {k: hermes1[k] - hermes0.get(k, 0) for k in hermes1}
    run.hops["runner_listener_answered"] = run.hops.pop("listener_answered")
    run.hops["control_plane_tool_route"] = len(cp.history.filter(route="tool")) - tool_route0
    run.hops["team_world_reached"] = sum(a.grant.stats.calls for a in admins.values())
    run.hops["team_world_executed"] = desk.world.executions
    run.hops["hub_lease_executions"] = sum(a.grant.lease.executions for a in admins.values()
                                           if a.grant.lease is not None)
    for a in admins.values():
        if a.grant.lease is not None and a.grant.lease.active:
            assert (await cp.close_lease(a.grant.lease)).ok
        assert (await cp.close_channel(a.ch)).ok
    for a in admins.values():
        run.transcripts[a.name] = await stored_messages(cp, runner_id, a)
    run.timings["total_s"] = time.monotonic() - t_start
    return run


async def stored_messages(cp: ControlPlane, runner_id: str, a: Admin) -> str:
    """The session's stored messages, read through the runner (``http`` command)."""
    out = await cp.command(runner_id, "http", {
        "path": f"/api/sessions/{a.stored}/messages", "method": "GET",
        "search": f"?profile={PROFILE}"}, account=a.name, profile=PROFILE)
    assert out.ok and out.result["status"] == 200, out
    return base64.b64decode(out.result["body"]).decode()


async def _unbound(side: HermesSide) -> bool:
    return await side.unbinds() >= 1
