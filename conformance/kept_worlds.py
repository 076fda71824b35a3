"""Kept worlds: one runner start-up shared by consecutive cases that need nothing but a plain,
idle world.

Rules:
- A case borrows only a world kept for the **same world options** (and runner command, Hermes,
  world factory), and only when the run keeps worlds (:func:`keeps_worlds`: not under
  ``--conformance-fresh-worlds``; the default world factory and the scripted Hermes only). A
  case with ``start_runner=False`` or ``manual_clock=True`` (:data:`UNSHARED`), or marked
  ``fresh=True``, always gets a fresh world, as before.
- A world is kept after a case only when the case **passed** and every row of :data:`GATES`
  holds: the same runner process, online with a poll parked (on whatever epoch the case left:
  the next case reads the current one); nothing in flight on either side (no queued command,
  channel, lease or armed fault, Hermes not held at a pause point, no open Hermes socket or
  running turn); nothing written to the store; no fault injected and no server error answered
  during the case (a runner's reaction to one — a reconnect after its pause — may come after
  the case ended). A world that fails one is closed (the case's ``data.world_after`` names the
  refusal) and the next case opens a fresh one — so a broken or disturbed world never reaches
  another case.
- Handing a kept world to the next case forgets what the last one saw: the control plane's
  history (all but the exchange still open: the held poll, whose answer is the case's) and
  lifecycle log and the scripted Hermes' effect log are cleared (``seq`` keeps counting). The
  runner's ledger and Hermes' idle stored sessions stay: they are what a runner that has served
  earlier commands has, which the protocol allows.
- A pause point the case armed and Hermes never reached is disarmed (it holds nothing), and a
  channel the case left open is closed (``gateway.close``) before the gates are read, and the
  runner goes once round its poll loop (the held poll answered empty, the next one parked), so a
  runner still busy with the case is seen busy.
- The **one pool** of a worker (:class:`Pool`, :func:`conformance.casefixtures.pool_of`) keeps
  both kinds: the worlds of plain cases (borrowed by the ``world`` fixture, gated above) and the
  rigs of the property machines and the fault matrix (:mod:`conformance.machines.rig`: kept
  after a run that passed, their server clock caught up with the wall when borrowed). At most
  :data:`CAPACITY` are kept, keyed by :func:`world_key` (a rig's key names it a rig); the least
  recently used is closed first. The pool closes what it keeps at the end of the session.
- A world is kept only while the session's event loop serves it. A machine run is synchronous
  (its rig runs in its own thread): the loop stands still meanwhile, the kept worlds' control
  planes answer nothing and their runners may time out and reconnect. So a machine that takes a
  rig (:meth:`Pool.freeze`) closes the kept worlds first: a later case never inherits that.
- When the run's order is known ahead (one process running its cases on lanes,
  :mod:`conformance.lanes`), a world is kept only while a case not started yet has its key
  (``Pool.wanted``): one no later case can borrow is closed instead of pushing a useful one out.
- A case on a fresh world runs beside the worlds kept idle: each world is its own control
  plane, Hermes, runner process and state directory, and an idle runner only holds its poll.
- Why: a case's cost is mostly the runner's start-up (the floor the certify bench prints); about
  two thirds of the core profile are plain cases, so keeping their world saves that many
  start-ups. A vendor who wants each case on a fresh runner passes ``--fresh-worlds`` (then
  nothing is kept, neither worlds nor rigs).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from .bounds import scaled

#: How long a world may take to park its next poll before it counts as not idle.
IDLE_TIMEOUT = 5.0


@dataclass(frozen=True)
class Mark:
    """What a world looked like when a case began on it."""

    runs: int
    store_writes: int
    knobs: dict[str, Any]


#: The parts of a world whose public plain settings (numbers, strings, flags, tuples) a case
#: may turn — ``hermes.bridge.fail_bind = 500``, a timing — or whose methods it may patch on
#: the instance (``kill_on_effect`` wraps ``effects.record``), and must not hand on so.
KNOB_HOLDERS: tuple[tuple[str, Callable[[Any], Any]], ...] = (
    ("hermes", lambda w: w.hermes), ("hermes.core", lambda w: w.hermes.core),
    ("hermes.bridge", lambda w: w.hermes.bridge), ("hermes.ws", lambda w: w.hermes.ws),
    ("hermes.script", lambda w: w.hermes.script), ("cp", lambda w: w.cp),
    ("cp.hub", lambda w: w.cp.hub), ("cp.timings", lambda w: w.cp.timings),
    ("cp.limits", lambda w: w.cp.limits), ("hermes.effects", lambda w: w.hermes.effects),
    ("cp.history", lambda w: w.cp.history), ("cp.lifecycle", lambda w: w.cp.lifecycle),
)


def knobs(world: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, get in KNOB_HOLDERS:
        obj = get(world)
        for attr, value in vars(obj).items():
            if callable(value) and callable(getattr(type(obj), attr, None)):
                out[f"{name}.{attr}"] = "patched"
            elif not attr.startswith("_") and (value is None or isinstance(
                    value, int | float | str | bool | tuple)):
                out[f"{name}.{attr}"] = value
    out["hermes.password"] = getattr(world.hermes, "password", None)  # change_password()
    return out


def _same_knobs(world: Any, begun: Mark) -> bool:
    return knobs(world) == begun.knobs


#: The one world factory whose worlds are kept (another ``--conformance-world`` gets a fresh
#: world per case: its worlds may not have the parts the gates read).
KEEPABLE_WORLD = "conformance.worlds:open_world"

#: World options under which a world is never kept: a runner not started by the world, or a
#: server clock the case moves (the runner's own clock would not follow it to the next case).
UNSHARED = {"start_runner": False, "manual_clock": True}


def keeps_worlds(*, fresh_worlds: bool, spec: str, hermes_mode: str) -> bool:
    """Whether a run keeps worlds at all: not under ``--conformance-fresh-worlds``, only for the
    default world factory and the scripted Hermes."""
    return not fresh_worlds and spec == KEEPABLE_WORLD and hermes_mode == "scripted"


def shares_world(options: dict[str, Any]) -> bool:
    """Whether a case with these world options may borrow a kept world (of the same options)."""
    return not options.get("fresh") and not any(
        k in options and options[k] == v for k, v in UNSHARED.items())


def world_key(runner_cmd: str, hermes_mode: str, spec: str, options: dict[str, Any]) -> str:
    """Worlds are shared only between cases of one runner command, Hermes and world options."""
    opts = sorted((k, repr(v)) for k, v in options.items() if k != "fresh")
    return repr((runner_cmd, hermes_mode, spec, opts))


def mark(world: Any) -> Mark:
    runs = len(world.runner.runs) if world.runner is not None else 0
    return Mark(runs=runs, store_writes=world.cp.store.writes, knobs=knobs(world))


Check = Callable[[Any, Mark], bool]

#: (name, why the world is not kept, holds(world, mark)). Checked in order; the first that
#: fails is the refusal. What runs is this table.
GATES: tuple[tuple[str, str, Check], ...] = (
    ("runner-running", "the runner is not running",
     lambda w, m: w.runner is not None and w.runner.running),
    ("same-process", "the runner was restarted during the case",
     lambda w, m: len(w.runner.runs) == m.runs),
    ("plain-clock", "the runner runs under faketime",
     lambda w, m: not w.runner.clock_offset),
    ("online", "the runner is not online", lambda w, m: w.cp.is_online(w.runner_id)),
    ("no-queue", "a command is still queued or in flight",
     lambda w, m: not w.cp.queued(w.runner_id)),
    ("no-channel", "a gateway channel is open", lambda w, m: not w.cp.channels(w.runner_id)),
    ("no-lease", "a team-tools lease is bound", lambda w, m: not w.cp.leases(w.runner_id)),
    ("calm", "the case injected a fault or got a server error (the runner may still react)",
     lambda w, m: not any(ex.fault or (ex.status or 0) >= 500 for ex in w.cp.history.entries)),
    ("no-fault", "a fault is still armed",
     lambda w, m: not any(f.n > 0 for fs in w.cp.faults.armed.values() for f in fs)
     and not w.cp.faults.duplicates_batch and not w.cp.faults.duplicates_next_poll),
    ("store-untouched", "the case wrote to the store (runners, accounts, sources)",
     lambda w, m: w.cp.store.writes == m.store_writes),
    ("same-knobs", "the case turned a setting of Hermes or the control plane",
     _same_knobs),
    ("no-pause", "Hermes is held at a pause point",
     lambda w, m: not w.hermes.core.pauses.holding()),
    ("no-socket", "a Hermes WebSocket is open", lambda w, m: not w.hermes.core.conns),
    ("no-turn", "a Hermes turn is running",
     lambda w, m: not any(s.running for s in w.hermes.core.live.values())
     and not any(not t.done() for t in w.hermes.core.tasks)),
)


def refusal(world: Any, begun: Mark) -> str | None:
    """The first gate that does not hold (``name: reason``), or None: the world may be kept."""
    for name, reason, holds in GATES:
        try:
            ok = holds(world, begun)
        except Exception as exc:  # a world of another shape is never kept
            return f"{name}: {type(exc).__name__}"
        if not ok:
            return f"{name}: {reason}"
    return None


async def _until(cond: Callable[[], bool], timeout: float = IDLE_TIMEOUT) -> bool:
    """Poll ``cond`` (every 10 ms, at most ``timeout`` s); whether it came true."""
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while not cond():
        if loop.time() >= end:
            return False
        await asyncio.sleep(0.01)
    return True


async def _tidy(world: Any) -> str | None:
    """Close the channels the case left open; a refusal when that does not settle."""
    if not world.runner.running or not world.cp.is_online(world.runner_id):
        return None  # the gates say why
    # a pause point never reached holds nothing: disarmed first, so closing cannot reach it
    world.hermes.core.pauses.disarm_unreached()
    for ch in list(world.cp.channels(world.runner_id).values()):
        try:
            await asyncio.wait_for(world.cp.close_channel(ch), scaled(IDLE_TIMEOUT))
        except Exception as exc:
            return f"tidy: closing a channel left open failed ({type(exc).__name__})"
    if not await _until(lambda: not world.hermes.core.conns):
        return "tidy: a Hermes WebSocket stayed open after its channel closed"
    return None


async def _round_trip(world: Any) -> str | None:
    """Answer the held poll empty and wait for the next one; a refusal when it does not come."""
    cp, rid = world.cp, world.runner_id
    if not world.runner.running or not cp.is_online(rid):
        return None
    try:
        held = await cp.poll_held(rid, timeout=IDLE_TIMEOUT)
        held.wake()
        await cp.poll_held(rid, other_than=held, timeout=IDLE_TIMEOUT)
    except Exception:
        return "idle: the runner did not park its next poll"
    return None


def begin_case(world: Any) -> Mark:
    """Forget what the previous case saw; the mark the next keep decision compares with."""
    world.cp.history.forget_answered()
    world.cp.lifecycle.clear()
    world.hermes.effects.clear()
    world.cp.faults.clear()
    return mark(world)


#: How many worlds and rigs one worker keeps at once (the least recently used is closed first):
#: the default world, a rig, and one world of other options, so a short run of cases with
#: other options (``hermes_script="team"``) does not cost the default world its runner.
CAPACITY = 3


def rig_key(runner_cmd: str, options: dict[str, Any]) -> str:
    """A machine rig's key: never equal to a world's (:func:`world_key`)."""
    return repr(("rig", runner_cmd, sorted((k, repr(v)) for k, v in options.items())))


@dataclass
class Kept:
    world: Any
    key: str
    closer: Callable[[], Awaitable[Any]]
    cases: list[str] = field(default_factory=list)
    unsettled: bool = False  # a fresh world whose runner did not park a poll: never kept
    #: a rig (its own Portal thread) is closed at once, without the session's event loop
    close_now: Callable[[], None] | None = None


@dataclass
class Pool:
    """What one worker keeps: worlds and rigs, at most ``capacity``, least recently used first."""

    enabled: bool = True  # worlds are kept (keeps_worlds)
    rigs: bool = True  # rigs are kept (not under --fresh-worlds)
    capacity: int = CAPACITY
    kept: list[Kept] = field(default_factory=list)
    closing: list[Kept] = field(default_factory=list)  # worlds to close at the next await
    #: whether a case still to come can use a world of this key (None: any may); a world
    #: nobody will borrow is closed instead of kept (it would only push a useful one out)
    wanted: Callable[[str], bool] | None = None

    def take(self, key: str) -> Kept | None:
        """Remove and return what is kept for ``key`` (no settling), or None."""
        for i, k in enumerate(self.kept):
            if k.key == key:
                return self.kept.pop(i)
        return None

    def keep(self, kept: Kept) -> None:
        """Keep ``kept`` as the most recently used; over capacity the least recently used go
        (a rig closed at once, a world at the next await: :meth:`drain`)."""
        self.kept.append(kept)
        while len(self.kept) > max(1, self.capacity):
            self._drop(self.kept.pop(0))

    def freeze(self) -> None:
        """The session's loop is about to stand still (a synchronous machine run): the kept
        worlds will not be served, so none of them is handed on; they close at the next await."""
        for k in [k for k in self.kept if k.close_now is None]:
            self.kept.remove(k)
            self._drop(k)

    def _drop(self, kept: Kept) -> None:
        if kept.close_now is not None:
            kept.close_now()
        else:
            self.closing.append(kept)

    async def drain(self) -> None:
        """Close the worlds dropped while no loop ran."""
        while self.closing:
            await self.closing.pop(0).closer()

    async def borrow(self, key: str) -> Kept | None:
        """The kept world for ``key`` (idle: its poll parked), or None; one that did not park
        its poll is closed. Worlds of other keys stay kept."""
        await self.drain()
        kept = self.take(key)
        if kept is None:
            return None
        if not await self.settle(kept):
            await kept.closer()
            return None
        return kept

    async def settle(self, kept: Kept) -> bool:
        """Wait (bounded) until the runner parks a poll; False (and ``kept`` marked not to be
        kept) when it does not."""
        try:
            await kept.world.cp.poll_held(kept.world.runner_id, timeout=IDLE_TIMEOUT)
        except Exception:
            kept.unsettled = True
            return False
        return True

    async def give_back(self, kept: Kept, *, passed: bool, begun: Mark) -> str | None:
        """Keep ``kept`` for the next case (None), or close it and say why (a failed case, a
        refused gate). A
        channel the case left open is closed first (``gateway.close``, as the admin would);
        then the runner must go once more round its poll loop (its held poll is answered empty
        and it parks the next one) before the gates are read, so a runner still reacting to the
        case (a reset poll after an error, say) is seen doing so."""
        why = ("the case did not pass" if not passed else
               "unwanted: no case to come shares this world"
               if self.wanted is not None and not self.wanted(kept.key) else
               "idle: the runner did not park a poll" if kept.unsettled else
               await _tidy(kept.world) or await _round_trip(kept.world) or
               refusal(kept.world, begun))
        if why is not None:
            await kept.closer()
            return why
        self.keep(kept)
        await self.drain()
        return None

    async def close(self) -> None:
        """Close everything kept, the worlds side by side (each its own runner, control plane
        and Hermes: one's stop never waits for another's)."""
        while self.kept:
            self._drop(self.kept.pop())
        closing, self.closing = self.closing, []
        outcomes = await asyncio.gather(*(k.closer() for k in closing), return_exceptions=True)
        for outcome in outcomes:
            if isinstance(outcome, BaseException):
                raise outcome

    def close_rigs(self) -> None:
        """Close the kept rigs (no loop needed): the session's end when no world was kept."""
        for k in list(self.kept):
            if k.close_now is not None:
                self.kept.remove(k)
                k.close_now()
