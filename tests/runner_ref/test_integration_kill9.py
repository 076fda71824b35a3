"""kill -9 at random instants while commands flow: after a restart every redelivered command is
answered from the ledger (the same receipt) or ``runner_command_uncertain`` — never re-executed,
and no receipt the control plane already saw is ever lost."""
from __future__ import annotations

import asyncio
import os
import random
import signal
import time
from pathlib import Path
from typing import Any

from integration import delivered, replay, rig
from stub_hermes import StubHermes

ROUNDS = 3


async def test_kill9_at_random_points_loses_no_receipt(tmp_path: Path) -> None:
    seed = int(os.environ.get("RUNNER_REF_KILL_SEED", time.time_ns() % 1_000_000))
    print(f"kill -9 seed: {seed} (RUNNER_REF_KILL_SEED={seed} to replay)")
    rnd = random.Random(seed)
    async with StubHermes() as hermes, rig(tmp_path, hermes.url) as r:
        first_outcome: dict[str, Any] = {}
        n = 0
        for _round in range(ROUNDS):
            handles: list[Any] = []

            async def flow(handles: list[Any]) -> None:
                nonlocal n
                while True:
                    n += 1
                    h = await r.cp.submit(r.runner_id, "http", {
                        "path": "/api/config", "method": "GET",
                        "search": f"profile=default&n={n}"}, account="alice", deadline=30)
                    handles.append(h)
                    await asyncio.sleep(0)
                    if len([x for x in handles if not x.done()]) > 40:
                        await asyncio.wait_for(handles[-40].wait(), 10)

            driver = asyncio.create_task(flow(handles))
            await asyncio.sleep(rnd.uniform(0.05, 0.6))   # the random kill instant
            os.killpg(r.runner.pid, signal.SIGKILL)
            await r.runner.wait(5)
            driver.cancel()
            await r.restart()
            await r.cp.wait_online(r.runner_id, timeout=10)
            for h in handles:
                out = await asyncio.wait_for(h.wait(), 10)
                first_outcome.setdefault(h.id, out)

        wires = {w["id"]: w for w in delivered(r.cp, "http")}
        assert wires, "no command was delivered before the kills"
        answers: list[Any] = []
        batch = list(wires.values())
        for i in range(0, len(batch), 50):   # stay under the 64 pending commands limit
            replays = [await replay(r.cp, r.runner_id, w) for w in batch[i:i + 50]]
            answers += await asyncio.gather(*(asyncio.wait_for(h.wait(), 20) for h in replays))
        completed = uncertain = 0
        for wire, again in zip(wires.values(), answers, strict=True):
            first = first_outcome.get(wire["id"])
            if first is not None and first.ok:
                assert again.ok and again.result == first.result, (seed, wire["id"], again)
            if again.ok:
                completed += 1
            else:
                assert again.code == "runner_command_uncertain", (seed, again)
                uncertain += 1
        assert all(v <= 1 for v in hermes.hits.values()), (seed, hermes.hits.most_common(3))
        print(f"{len(wires)} commands replayed: {completed} from the ledger, {uncertain} uncertain")
