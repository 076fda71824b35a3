"""Helpers of cases that submit one command and judge its outcome and the Hermes effects it
caused (LIM-901/902, PERM-901, TT-901/902).

Rules: the world is the only way in (control plane, scripted Hermes); waits are bounded
(``OUTCOME_TIMEOUT``).
"""

from __future__ import annotations

from typing import Any

OUTCOME_TIMEOUT = 15.0


def last_seq(world: Any) -> int:
    entries = world.hermes.effects.entries
    return max(world.cp.history.last_seq, entries[-1].seq if entries else 0)


def effects_since(world: Any, seq: int) -> list[str]:
    return [f"#{e.seq} {e.kind}" for e in world.hermes.effects.entries if e.seq > seq]


def brief_outcome(out: Any) -> str:
    if out.ok:
        return f"200 result {str(out.result)[:160]}"
    return f"{out.status} {out.code} ({(out.message or '')[:120]})"


async def submit_http(world: Any, payload: dict[str, Any]) -> Any:
    handle = await world.cp.submit(world.runner_id, "http", payload, profile="default")
    return await handle.wait(OUTCOME_TIMEOUT)
