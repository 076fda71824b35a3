"""kill -9 at chosen points while commands flow: after a restart every redelivered command is
answered from the ledger (the same receipt) or ``runner_command_uncertain`` — never re-executed,
and no receipt the control plane already saw is ever lost.

The kill points are drawn by Hypothesis (a failure shrinks and prints the plan that found it) and
are defined by events, not by time: "while Hermes holds the k-th request of the round" (the
command is ``started`` and mid-execution) or "right after the k-th command of the round was
answered" (its receipt is durable and posted)."""
from __future__ import annotations

import asyncio
import os
import signal
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.budget import examples

from .integration import Rig, delivered, replay, rig
from .stub_hermes import StubHermes

ROUNDS = 3
KillPoint = tuple[str, int]    # ("held" | "answered", k)
kill_points = st.tuples(st.sampled_from(["held", "answered"]), st.integers(1, 25))


async def _kill_at(r: Rig, hermes: StubHermes, point: KillPoint, handles: list[Any],
                   grown: asyncio.Event) -> None:
    """Wait for the kill point of this round, then kill -9 the runner's process group."""
    phase, k = point
    if phase == "held":
        hermes.hold_request(k)
        await asyncio.wait_for(hermes.held.wait(), 30)
    else:
        while len(handles) < k:   # the driver sets ``grown`` at every command it submits
            grown.clear()
            await asyncio.wait_for(grown.wait(), 30)
        await asyncio.wait_for(handles[k - 1].wait(), 30)
    os.killpg(r.runner.pid, signal.SIGKILL)
    await r.runner.wait(5)
    hermes.unhold()


async def _run(plan: list[KillPoint]) -> None:
    with tempfile.TemporaryDirectory(prefix="kill9-") as tmp:
        async with StubHermes() as hermes, rig(Path(tmp), hermes.url) as r:
            await _rounds(r, hermes, plan)


async def _rounds(r: Rig, hermes: StubHermes, plan: list[KillPoint]) -> None:
    first_outcome: dict[str, Any] = {}
    n = 0
    for point in plan:
        handles: list[Any] = []
        grown = asyncio.Event()

        async def flow(handles: list[Any], grown: asyncio.Event) -> None:
            nonlocal n
            while True:
                n += 1
                h = await r.cp.submit(r.runner_id, "http", {
                    "path": "/api/config", "method": "GET",
                    "search": f"profile=default&n={n}"}, account="alice", deadline=60)
                handles.append(h)
                grown.set()
                await asyncio.sleep(0)   # an await point: let the runner's polls through
                if len([x for x in handles if not x.done()]) > 40:
                    await asyncio.wait_for(handles[-40].wait(), 30)

        driver = asyncio.create_task(flow(handles, grown))
        try:
            await _kill_at(r, hermes, point, handles, grown)
        finally:
            driver.cancel()
        await r.restart()
        await r.cp.wait_online(r.runner_id, timeout=10)
        for h in handles:
            out = await asyncio.wait_for(h.wait(), 30)
            first_outcome.setdefault(h.id, out)

    wires = {w["id"]: w for w in delivered(r.cp, "http")}
    assert wires, "no command was delivered before the kills"
    answers: list[Any] = []
    batch = list(wires.values())
    for i in range(0, len(batch), 50):   # stay under the 64 pending commands limit
        replays = [await replay(r.cp, r.runner_id, w) for w in batch[i:i + 50]]
        answers += await asyncio.gather(*(asyncio.wait_for(h.wait(), 30) for h in replays))
    completed = uncertain = 0
    for wire, again in zip(wires.values(), answers, strict=True):
        first = first_outcome.get(wire["id"])
        if first is not None and first.ok:
            assert again.ok and again.result == first.result, (plan, wire["id"], again)
        if again.ok:
            completed += 1
        elif again.code == "runner_command_uncertain":
            uncertain += 1
        else:
            # never claimed before the kill: the replay asks admit again, and the control plane
            # may refuse it (the command's deadline passed while the runner was down)
            assert again.code == "runner_command_not_admitted", (plan, again)
    assert all(v <= 1 for v in hermes.hits.values()), (plan, hermes.hits.most_common(3))
    if any(phase == "held" for phase, _ in plan):
        assert uncertain >= 1, plan   # a command killed mid-execution is never replayed as done
    print(f"{plan}: {len(wires)} commands replayed: {completed} from the ledger, "
          f"{uncertain} uncertain")


@pytest.mark.slow  # end to end: real runners SIGKILLed at drawn points, several restarts each
@settings(max_examples=examples(ci=2))
@given(plan=st.lists(kill_points, min_size=ROUNDS, max_size=ROUNDS))
def test_kill9_at_drawn_points_loses_no_receipt(plan: list[KillPoint]) -> None:
    asyncio.run(_run(plan))
