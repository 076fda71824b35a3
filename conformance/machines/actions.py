"""Things that happen in the world, as async actions on a :class:`~.rig.Rig`'s world.

Rules:
- One action, one world event; the machines' rules and the fault matrix call the same actions,
  so a matrix cell is exactly a machine step pinned to one point.
- Stopping exactly at a step uses the control plane's targeted faults (``delay_next`` on the
  manual clock holds a request; nothing ever sleeps) and the scripted Hermes' pause points;
  ``KILL_POINTS`` below is the table of how each point is reached, per command kind.
- A command is submitted with an id the harness chose, so faults can target it before delivery.
- An outcome is awaited with a bound; a command whose runner died mid-call ends 503 on the
  replacement and its execution is unknown (the checker treats it as indeterminate).
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from fake_server import Outcome

from ..bounds import scaled
from .rig import WAIT, Rig, within

#: A held request sleeps on the server clock: it is released only by the clock passing its hold
#: (a cell that must release it holds for less, see ``faults_matrix._deadline``) or by a server
#: restart (``restart_server`` advances past it). ``faults.clear()`` disarms faults not yet
#: taken; it does not wake a request already held.
HOLD = 3600.0
#: command kinds of the matrix (a gateway prompt is gateway.rpc prompt.submit on an open channel)
KINDS = ("http", "prompt", "lease.create")
#: kill point → (how it is reached, what the harness waits for). ``hold:ROUTE`` delays the
#: command's next ROUTE request; ``pause:SPEC`` holds Hermes; ``see:X`` waits for record X.
KILL_POINTS: dict[str, str] = {
    "after_delivery": "see:delivered",          # the poll answer carrying it was sent
    "after_started": "hold:admit",              # the admit request arrived (the started row)
    "after_admit": "see:admit_answered",        # the admit answer was sent
    "during_hermes": "pause:before prompt.accept",  # prompt only: Hermes holds the call
    "after_hermes_replied": "see:effect",       # Hermes recorded the effect / replied
    "before_result_post": "hold:result",        # the result request arrived and is held
    "after_result_post": "see:result_answered",  # the result was accepted
}
POINTS = tuple(KILL_POINTS)
#: (kind, point) cells the harness cannot stop at exactly: Hermes has no pause point on HTTP
#: or on the bridge's bind route, so "during the Hermes call" is only reachable for a prompt.
UNREACHABLE = frozenset({("http", "during_hermes"), ("lease.create", "during_hermes"),
                         ("lease.create", "after_hermes_replied")})  # create has no Hermes effect


def new_id() -> str:
    return f"cmd-{uuid.uuid4().hex[:12]}"


def http_payload(rig: Rig, name: str = "a.txt") -> dict[str, Any]:
    w = rig.world
    path = w.artifact_root / name
    if not path.exists():
        path.write_text(f"artifact {name}\n")
    return {"path": "/api/files/download", "method": "GET",
            "search": f"?profile=default&path={path}"}


async def bounded(aw: Awaitable[Any], timeout: float = WAIT, what: str = "a control-plane call"
                  ) -> Any:
    return await within(what, aw, timeout)


async def http(rig: Rig, *, name: str = "a.txt", command_id: str | None = None,
               wait: bool = True) -> Any:
    w = rig.world
    handle = await w.cp.submit(w.runner_id, "http", http_payload(rig, name),
                               command_id=command_id or new_id())
    if wait:
        await settle_handle(rig, handle)
    return handle


#: how long an example waits for the runner to answer every admit it sent for one command
ANSWERS_WAIT = 3.0


async def answers_land(rig: Rig, command_id: str) -> None:
    """Wait (bounded, scaled; never an error) until the runner has posted a result for every
    admit it sent for ``command_id``. A runner that runs a copy beside the first delivery (a
    bug) sends a second admit at once, and its answer then lands before the example is judged
    however slow the machine; a correct runner's one admit has its one result already."""
    history = rig.world.cp.history

    def landed(_: Any) -> bool:  # of the whole history, whichever exchange was offered
        mine = [ex for ex in history if ex.command_id == command_id and ex.answered]
        admits = sum(1 for ex in mine if ex.route == "admit")
        return sum(1 for ex in mine if ex.route == "result") >= admits

    with contextlib.suppress(TimeoutError):  # the kept exchanges are offered first
        await history.wait_for(landed, timeout=scaled(ANSWERS_WAIT))


#: how often a replay the control plane itself ended offline is submitted again
OFFLINE_RESUBMITS = 3


async def replay(rig: Rig, wire: dict[str, Any], *, other: bool = False) -> Outcome:
    """Queue ``wire`` again and settle it. A replay the control plane ended on its own
    (``Command.ended_offline``: queued while the runner was between online states, failed by
    the hub's disconnect, or refused at enqueue) was never judged by the runner: wait for the
    runner to be online again and submit it again (at most ``OFFLINE_RESUBMITS`` times), unless
    the runner was disabled (then nothing more runs, and runner_offline is the answer)."""
    w = rig.world
    payload = None
    if other:
        payload = {**wire["payload"], "search": str(wire["payload"].get("search", "")) + "&x=1"}
    for _ in range(OFFLINE_RESUBMITS):
        handle = await w.cp.replay(w.runner_id, wire, payload=payload)
        out = await settle_handle(rig, handle)
        record = await w.cp.store.get_runner(w.runner_id or "")
        if not handle.ended_offline or record is None or not record.enabled:
            return out  # disabled: runner_offline is the control plane's last word (upstream #16)
        assert w.runner is not None
        await w.runner.wait_online(w.cp, w.runner_id, WAIT)
    return out


async def channel(rig: Rig) -> Any:
    w = rig.world
    return await bounded(w.cp.open_channel(w.runner_id))


async def session(rig: Rig, ch: Any) -> str | None:
    return (await session_ids(rig, ch))[0]


async def session_ids(rig: Rig, ch: Any) -> tuple[str | None, str | None]:
    """(live session id, stored session id) of a new session on ``ch``."""
    out = await bounded(rig.world.cp.rpc(ch, "session.create", {"profile": "default", "cols": 80}))
    if not out.ok or not isinstance(out.result, dict):
        return None, None
    return out.result.get("session_id"), out.result.get("stored_session_id")


def prompt_payload(ch: Any, sid: str | None, text: str = "hi") -> dict[str, Any]:
    return {"connectionId": ch.connection_id, "method": "prompt.submit",
            "params": {"session_id": sid, "text": text}}


def lease_payload(rig: Rig, ch: Any, ids: tuple[str | None, str | None]
                  ) -> tuple[Any, dict[str, Any]]:
    sess = {"runtimeId": ids[0], "storedId": ids[1]}
    lease = rig.world.cp.hub.register_lease(ch, "default", sess, [], {})
    return lease, {"leaseId": lease.lease_id, "profile": "default", "workId": lease.lease_id,
                   "session": sess, "catalog": [], "workspaceMemory": False}


async def submit_kind(rig: Rig, kind: str, cid: str) -> Any:
    """Submit one command of ``kind`` with id ``cid`` (its channel/session made first)."""
    w = rig.world
    if kind == "http":
        return await http(rig, command_id=cid, wait=False)
    ch = await channel(rig)
    ids = await session_ids(rig, ch)
    if kind == "prompt":
        return await w.cp.submit(w.runner_id, "gateway.rpc", prompt_payload(ch, ids[0]),
                                 channel=ch, command_id=cid)
    lease, payload = lease_payload(rig, ch, ids)
    return await w.cp.submit(w.runner_id, "lease.create", payload, channel=ch, lease=lease,
                             profile="default", command_id=cid)


def _effect_for(kind: str) -> str:
    return {"http": "file.read", "prompt": "prompt.accepted", "lease.create": "bind"}[kind]


async def reach(rig: Rig, kind: str, point: str, cid: str, *, hold: float = HOLD) -> Any:
    """Submit a ``kind`` command and return once it stands exactly at ``point`` (a ``hold:``
    point holds the request for ``hold`` seconds of the server clock)."""
    w = rig.world
    how = KILL_POINTS[point]
    pause = None
    if how.startswith("hold:"):
        w.cp.faults.delay_next(how[5:], seconds=hold, target=cid)
    elif how.startswith("pause:"):
        pause = w.hermes.pause_at(how[6:])
    mark = w.sequence()
    handle = await submit_kind(rig, kind, cid)
    at = f"{kind} command {cid} to stand {point} ({how})"
    if how == "see:delivered":
        await within(at, w.cp.lifecycle.wait_for(
            lambda f: f.kind == "delivered" and f.command_id == cid, timeout=None))
    elif how.startswith("hold:"):
        route = how[5:]
        await within(at, w.cp.history.wait_for(
            lambda ex: ex.route == route and ex.command_id == cid, timeout=None))
    elif how == "see:admit_answered":
        await within(at, w.cp.history.wait_for(
            lambda ex: ex.route == "admit" and ex.command_id == cid and ex.status is not None,
            timeout=None))
    elif pause is not None:
        await within(at, pause.reached(timeout=WAIT + 1))
        rig.note("held", command_id=cid)
    elif how == "see:effect":
        await within(at, w.hermes.effects.wait_for_count(
            _effect_for(kind), 1, timeout=WAIT + 1, where=lambda e: e.seq > mark))
    elif how == "see:result_answered":
        await within(at, handle.wait(WAIT + 1))
    return handle


async def kill(rig: Rig, point: str, cid: str | None) -> None:
    """SIGKILL the runner now and record it (instance, point, command)."""
    inst = _instance(rig)
    assert rig.world.runner is not None
    await rig.world.runner.kill()
    rig.note("kill", instance=inst, command_id=cid, reason=point)


async def start(rig: Rig, *, follow_clock: bool = False) -> None:
    w = rig.world
    assert w.runner is not None
    old = w.cp.epoch(w.runner_id)
    rig.note("start")
    offset = w.clock_offset() if follow_clock else None
    rig.runner_offset = offset or 0.0
    await w.runner.start(faketime_offset=offset)
    await w.runner.wait_online(w.cp, w.runner_id, WAIT, other_than=old)
    rig.stats.restarts += 1


async def restart_runner(rig: Rig, *, crash: bool = True) -> None:
    w = rig.world
    assert w.runner is not None
    if crash:
        await kill(rig, "restart", None)
    else:
        await w.runner.stop()
    await start(rig)


async def restart_server(rig: Rig) -> None:
    w = rig.world
    old = w.cp.epoch(w.runner_id)
    rig.note("server_restart")
    w.cp.faults.clear()
    assert w.clock is not None
    w.clock.advance(HOLD + 1)  # a held request resumes into the stopping hub (503), never waits
    await w.cp.restart()
    w.hermes.release_all()
    rig.stats.server_restarts += 1
    assert w.runner is not None
    await w.runner.wait_online(w.cp, w.runner_id, WAIT, other_than=old)
    with contextlib.suppress(Exception):
        await w.admin.login()


async def new_epoch(rig: Rig, how: Callable[[], Awaitable[Any]]) -> None:
    """Cause a server-side disconnect (watchdog, reset) and wait for the runner's new epoch."""
    w = rig.world
    old = w.cp.epoch(w.runner_id)
    await how()
    assert w.runner is not None
    await w.runner.wait_online(w.cp, w.runner_id, WAIT, other_than=old)


def _instance(rig: Rig) -> str | None:
    w = rig.world
    for ex in reversed(w.cp.history.entries):
        if ex.runner_id == w.runner_id and ex.instance:
            return str(ex.instance)
    return None


async def retire(rig: Rig) -> tuple[Any, Outcome]:
    """A completed http command, its runner stopped, the server clock one hour (and a margin)
    past the runner's clock when it stored the receipt, the runner restarted under ``faketime``
    at the server clock's offset, and the command replayed: (handle, the replay's outcome)."""
    w = rig.world
    assert w.clock is not None and w.runner is not None
    handle = await http(rig)
    await w.runner.stop()
    w.clock.advance(time.time() + rig.runner_offset + 3605 - w.clock.now())
    rig.note("retire")
    await start(rig, follow_clock=True)
    return handle, await replay(rig, handle.wire)


TURN = 0.1  # seconds of wall time a command is given before the server clock is moved on
#: Seconds of wall time with no request of the runner open after which the clock moves anyway:
#: a runner blocked at Hermes with no poll open waits on a deadline only the clock ends.
IDLE = 1.0
#: Moves made at the pace of turns while a request is open (the stories' redeliveries of a
#: command in flight come early); the rest of a settle's budget is paced by :data:`IDLE`.
BRISK = 4


async def settle_handle(rig: Rig, handle: Any, turns: int = 12) -> Any:
    """Await a handle, moving the server clock past holds and redeliveries in small turns
    (at most ``turns`` moves of ``redelivery + 1`` s: within the command's deadline), never
    into the watchdog (``offline_after`` since the runner was last seen: while the runner is in
    its reconnect pause, moving the clock there would only take it offline). The moves go on
    while the runner works: a redelivery of a command in flight is a story the machines need
    (a runner that runs it again is caught only so).

    Pace: the first :data:`BRISK` moves are made while a request of the runner is open (a held
    poll, a delayed answer: the move is what can answer it), one per turn; every other move
    after :data:`IDLE` of wall time since the last one. A runner that pauses between polls (an
    open choice) would otherwise see every move spent while it sat in its pause, and its next,
    delayed poll held on a clock nobody moves; a runner slowed by the machine's load would see
    the budget spent in a second while its first attempt is still in flight (FLT-002's
    ``after_delivery`` server cell: 12 redeliveries ignored in 1.3 s, then a poll held on a
    clock nobody moved, in CI) — paced, the budget lasts about the whole wait.

    The wait (:data:`WAIT`) and the pace (:data:`IDLE`) are bounds of the harness, scaled by
    ``--timeout-multiplier`` (:func:`conformance.bounds.scaled`): a slow runner given a larger
    multiplier gets the longer wait, and its redeliveries spread over it."""
    w = rig.world
    assert w.clock is not None
    moved = 0
    pace = scaled(IDLE)
    idle_since = time.monotonic()
    for _ in range(int(scaled(WAIT) / TURN)):  # turns: a loaded machine's slow turns add up
        try:
            return await handle.wait(TURN)
        except TimeoutError:
            pass
        due = (moved < BRISK and bool(w.cp.history.open)) or time.monotonic() - idle_since >= pace
        if moved < turns and due:
            step = _clock_room(rig, w.timings.redelivery + 1)
            if step > 0:
                w.clock.advance(step)
                moved += 1
                idle_since = time.monotonic()
    return await within(f"the outcome of command {handle.id}", handle.wait(TURN))


def _clock_room(rig: Rig, want: float) -> float:
    """How far the server clock may move now without the watchdog taking the runner offline
    (``want`` when the runner has no online state: nothing to protect)."""
    room = rig.watchdog_room()
    return want if room is None else max(0.0, min(want, room))
