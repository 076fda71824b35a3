"""``actions.settle_handle`` moves the server clock while a request of the runner is open, and
otherwise only after ``IDLE`` of wall time: a runner pausing between polls (an open choice)
must not see every move spent during its pause, and its next poll held on a clock nobody
moves (the positive control ``poll-gap`` failed FLT-003 so). A runner blocked with no request
open still gets its moves, one per ``IDLE`` (its deadline is on the server clock)."""
from __future__ import annotations

import asyncio
from types import SimpleNamespace as NS
from typing import Any

import pytest

from conformance.machines import actions


class Clock:
    def __init__(self) -> None:
        self.moves: list[float] = []

    def advance(self, seconds: float) -> None:
        self.moves.append(seconds)


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
    rig = _rig(open_now)
    with pytest.raises(TimeoutError):
        await actions.settle_handle(rig, Never(), turns=100)
    return list(rig.world.clock.moves)


async def test_an_open_request_gets_a_move_every_turn(fast: None) -> None:
    assert len(await _moves(1)) >= 10


async def test_with_nothing_open_a_move_waits_for_idle(fast: None) -> None:
    assert 1 <= len(await _moves(0)) <= 3   # 0.5 s of turns, one move per 0.2 s idle
