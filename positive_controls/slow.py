"""Slow positive controls: the reference runner at the slow edge of what docs/protocol.md allows.

Rules of this module:
- Jitter is 20–150 ms per call, drawn from one :class:`random.Random` seeded by :func:`seed`
  (``python -m positive_controls … --seed N``; the seed is printed as a status line at start).
- Every delay is a plain ``asyncio.sleep`` inside the runner: the runner is slower, never wrong.
- The timing edges (slow start, reconnect pauses, poll gap, late admit) are certified one at a
  time by the nightly ``verify --each``; ``slow`` (in CI's ``both``) holds the jitter rows, the
  late events and ``poll-after-admit``. The request timeouts are not an edge: §2.3 states
  25 s (TT-905..908 rely on it: their 20 s clock jumps must not time a held poll out).
- ``poll-after-admit`` holds the next poll until every new command of the last answer reached
  its admit request (or was answered without one — a ledger replay, a refusal — before its
  result post): admit and next poll leave together, later than the
  reference runner's poll, which leaves as soon as the answer is read.
"""
from __future__ import annotations

import asyncio
import contextlib
import random
from typing import Any

from .control import Control, Patch, one

JITTER = (0.020, 0.150)
START_DELAY = 2.0
EVENT_DELAY = 0.100
RECONNECT_SHORT = 0.6    # REC-009 accepts ≥ 0.5 s; the docs say "about 1 s"
RECONNECT_LONG = 1.5
POLL_GAP = 2.0           # "start the next one within a few seconds of the previous answer"
ADMIT_DELAY = 1.0        # the command deadline is 30 s; the admit may leave late
RNG = random.Random()
SEED: list[int] = []


def seed(value: int | None = None) -> int:
    value = random.SystemRandom().randrange(2**31) if value is None else value
    RNG.seed(value)
    SEED[:] = [value]
    return value


async def pause(seconds: float) -> None:
    """Every delay of a slow control (the probes swap it for a recorder)."""
    await asyncio.sleep(seconds)


async def jitter() -> None:
    await pause(RNG.uniform(*JITTER))


def _jittered(orig: Any) -> Any:
    async def delayed(self: Any, *args: Any, **kwargs: Any) -> Any:
        await jitter()
        return await orig(self, *args, **kwargs)
    return delayed


def _delayed_by(seconds: float) -> Any:
    def make(orig: Any) -> Any:
        async def delayed(self: Any, *args: Any, **kwargs: Any) -> Any:
            await pause(seconds)
            return await orig(self, *args, **kwargs)
        return delayed
    return make


def _admits(loop: Any) -> dict[str, asyncio.Event]:
    return loop.__dict__.setdefault("_pc_admits", {})  # type: ignore[no-any-return]


def _release(loop: Any, cid: Any) -> None:
    ev = _admits(loop).pop(cid, None) if isinstance(cid, str) else None
    if ev is not None:
        ev.set()


def _take_then_wait(orig: Any) -> Any:
    async def _take_answer(self: Any, body: dict[str, Any], reset: bool) -> None:
        from runner_ref import timings
        new = [c["id"] for c in body.get("commands", []) if isinstance(c, dict)
               and isinstance(c.get("id"), str) and c["id"] not in self._handling]
        events = [_admits(self).setdefault(cid, asyncio.Event()) for cid in new]
        await orig(self, body, reset)
        if events:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(asyncio.gather(*(e.wait() for e in events)),
                                       timings.REQUEST_TIMEOUT)
    return _take_answer


def _admit_releases(orig: Any) -> Any:
    async def _admit_gate(self: Any, cmd: dict[str, Any], epoch: str) -> bool:
        admit = asyncio.ensure_future(orig(self, cmd, epoch))
        await asyncio.sleep(0)   # the admit request is on its way first
        _release(self, cmd.get("id"))
        return await admit  # type: ignore[no-any-return]
    return _admit_gate


def _answer_releases(orig: Any) -> Any:
    async def _handle(self: Any, cmd: dict[str, Any], epoch: str) -> Any:
        try:
            return await orig(self, cmd, epoch)
        finally:
            _release(self, cmd.get("id"))   # answered without an admit (replay, refusal, …)
    return _handle


def _gap_after_answer(orig: Any) -> Any:
    async def _take_answer(self: Any, body: dict[str, Any], reset: bool) -> None:
        await orig(self, body, reset)
        await self.reconnect_wait(POLL_GAP)   # cut short by a stop
    return _take_answer


CONTROLS: tuple[Control, ...] = (
    Control("jittered-control-plane", "slow",
            "Client-side request timeouts: 25 s",
            "sends every control-plane request at once",
            "delays every control-plane request (poll, admit, result, event, tool) by a "
            "seeded 20–150 ms jitter",
            one("runner_ref.machine_client:MachineClient._request", _jittered)),
    Control("jittered-hermes-http", "slow",
            "How long the runner waits for a Hermes reply",
            "sends every Hermes HTTP request at once",
            "delays every Hermes HTTP request (login, http kind, plugin bind) by 20–150 ms",
            one("runner_ref.hermes:HermesClient._raw", _jittered)),
    Control("jittered-hermes-rpc", "slow",
            "If the channel closes after any other request was sent and before its reply",
            "sends every JSON-RPC request and WebSocket connect to Hermes at once",
            "delays every JSON-RPC request and WebSocket connect by 20–150 ms",
            (Patch("runner_ref.gateway_channel:Channel.call", _jittered),
             Patch("runner_ref.hermes:HermesClient.ws_connect", _jittered))),
    Control("slow-start", "slow",
            "The runner MUST accept `--config <path>` as two separate arguments",
            "polls as soon as the ledger is open",
            f"starts {START_DELAY:g} s later (the first poll leaves {START_DELAY:g} s late)",
            one("runner_ref.poll_loop:PollLoop.run", _delayed_by(START_DELAY))),
    Control("late-events", "slow",
            "A failed `event` post other than 410 also leads to a local disconnect",
            "posts each Hermes event at once",
            f"posts each event {EVENT_DELAY * 1000:g} ms late (order kept)",
            one("runner_ref.poll_loop:PollLoop._post_event", _delayed_by(EVENT_DELAY))),
    Control("poll-after-admit", "slow",
            "start the next one within a few seconds of the previous answer",
            "sends the next poll as soon as an answer is read, before the admits",
            "sends the next poll only once every new command of the answer sent its admit "
            "(or ended without one): admit and next poll together",
            (Patch("runner_ref.poll_loop:PollLoop._take_answer", _take_then_wait),
             Patch("runner_ref.poll_loop:PollLoop._admit_gate", _admit_releases),
             Patch("runner_ref.poll_loop:PollLoop._handle", _answer_releases))),
    Control("reconnect-pause-short", "slow",
            "After a failed poll the runner SHOULD wait about 1 s before it polls again",
            "waits 1 s after a failed poll",
            f"waits {RECONNECT_SHORT:g} s",
            one("runner_ref.timings:RECONNECT_DELAY", lambda _o: RECONNECT_SHORT)),
    Control("reconnect-pause-long", "slow",
            "After a failed poll the runner SHOULD wait about 1 s before it polls again",
            "waits 1 s after a failed poll",
            f"waits {RECONNECT_LONG:g} s",
            one("runner_ref.timings:RECONNECT_DELAY", lambda _o: RECONNECT_LONG)),
    Control("late-admit", "slow",
            "| command deadline | 30 s; `lease.bind` 70 s; memory-extract 120 s |",
            "sends the admit as soon as the started row is durable",
            f"sends every admit {ADMIT_DELAY:g} s late (well inside the 30 s deadline)",
            one("runner_ref.poll_loop:PollLoop._admit_gate", _delayed_by(ADMIT_DELAY))),
    Control("poll-gap", "slow",
            "start the next one within a few seconds of the previous answer",
            "polls again at once after every answer",
            f"waits {POLL_GAP:g} s after every answer before the next poll",
            one("runner_ref.poll_loop:PollLoop._take_answer", _gap_after_answer)),
)
