"""``actions.settle_handle`` makes its first ``BRISK`` moves one per turn while a request of the
runner is open, and every other move only after ``IDLE`` of wall time: a runner pausing between
polls (an open choice) must not see every move spent during its pause, and its next poll held on
a clock nobody moves (the positive control ``poll-gap`` failed FLT-003 so); a runner slowed by
load must not see the whole budget spent in a second while its first attempt is in flight
(FLT-002's ``after_delivery`` server cell failed CI so). A runner blocked with no request open
still gets its moves, one per ``IDLE`` (its deadline is on the server clock)."""
from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace as NS
from typing import Any

import pytest

from conformance import bounds
from conformance.machines import actions


class Clock:
    def __init__(self) -> None:
        self.moves: list[float] = []
        self.at: list[float] = []

    def advance(self, seconds: float) -> None:
        self.moves.append(seconds)
        self.at.append(time.monotonic())


class Never:
    id = "cmd"

    async def wait(self, timeout: float) -> Any:
        await asyncio.sleep(timeout)
        raise TimeoutError


def _rig(open_now: int) -> Any:
    world = NS(clock=Clock(), timings=NS(redelivery=1.0), cp=NS(history=NS(open=open_now)))
    return NS(world=world, watchdog_room=lambda: None)


@pytest.fixture
def fast(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(actions, "TURN", 0.01)
    monkeypatch.setattr(actions, "IDLE", 0.2)
    monkeypatch.setattr(actions, "WAIT", 0.5)


async def _moves(open_now: int) -> list[float]:
    return (await _clock(open_now)).moves


async def _clock(open_now: int) -> Clock:
    rig = _rig(open_now)
    start = time.monotonic()
    with pytest.raises(TimeoutError):
        await actions.settle_handle(rig, Never(), turns=100)
    clock: Clock = rig.world.clock
    clock.at = [t - start for t in clock.at]
    return clock


async def test_an_open_request_gets_brisk_moves_then_paced_ones(fast: None) -> None:
    clock = await _clock(1)
    assert len(clock.moves) >= actions.BRISK + 1   # the budget goes on after the brisk moves
    assert clock.at[actions.BRISK - 1] < 0.15       # BRISK turns of 0.01 s (and slack)
    # paced: 0.5 s of wait after the brisk moves holds at most 3 moves of 0.2 s idle
    assert len(clock.moves) <= actions.BRISK + 3


async def test_with_nothing_open_a_move_waits_for_idle(fast: None) -> None:
    assert 1 <= len(await _moves(0)) <= 3   # 0.5 s of turns, one move per 0.2 s idle


async def test_the_wait_and_its_pace_follow_the_timeout_multiplier(
        fast: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """``--timeout-multiplier 3``: the wait lasts three times as long (a slow runner is given
    it), and the paced moves spread over it instead of all coming in the first WAIT."""
    monkeypatch.setenv(bounds.ENV, "3")
    start = time.monotonic()
    clock = await _clock(1)
    assert time.monotonic() - start >= 3 * 0.5 - 0.05   # WAIT 0.5 s, times 3
    assert clock.at[-1] > 0.5                            # moves still come after one WAIT
    assert len(clock.moves) <= actions.BRISK + 3         # 1.5 s at one per 0.6 s (IDLE 0.2 × 3)
