"""The poll loop in-process with a scripted control plane: ``x-runner-reset`` while locally
disconnected, local disconnect (channels and leases) on an epoch change and on every poll error,
the reconnect delay after errors only, and exit 1 only on ``runner_unauthorized``."""
from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from runner_ref import timings
from runner_ref.config import parse_config
from runner_ref.errors import ServerError
from runner_ref.ledger_store import LedgerStore
from runner_ref.poll_loop import PollLoop

CFG = {"protocol": 1, "serverURL": "http://127.0.0.1:9", "token": "t" * 40,
       "runnerId": "0b3c9a9e-2f51-4a8e-9a43-5e8f8e2f6b1c", "hermesURL": "http://127.0.0.1:9",
       "allowedProfiles": ["default"]}
DELAY = 0.3


def ok(epoch: str) -> dict[str, Any]:
    return {"epoch": epoch, "commands": []}


SCRIPT: list[Any] = [
    ok("e1"),                                                     # 1 reset poll → connected
    ok("e1"),                                                     # 2 same epoch: nothing drops
    ok("e2"),                                                     # 3 new epoch → disconnect
    ServerError(409, "runner_instance_retired", "instance retired"),   # 4 error → disconnect
    ServerError(503, "service_updating", "updating"),             # 5
    ServerError(0, "runner_request_failed", "control plane unreachable"),  # 6 transport
    ServerError(409, "runner_protocol_mismatch", "protocol"),     # 7
    ok("e3"),                                                     # 8 reset poll, new epoch
    ServerError(403, "runner_unauthorized", "runner disabled"),   # 9 fatal → exit 1
]


async def test_poll_loop_rules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                               capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(timings, "RECONNECT_DELAY", DELAY)
    store = await LedgerStore.open(str(tmp_path / "l.sqlite3"))
    poll_loop = PollLoop(parse_config(CFG), store, "inst")
    polls: list[bool] = []
    waits: list[tuple[int, float]] = []   # (polls made so far, delay) for every reconnect wait
    drops: list[tuple[str, int]] = []
    script = list(SCRIPT)

    async def poll(reset: bool) -> dict[str, Any]:
        polls.append(reset)
        item = script.pop(0)
        if isinstance(item, Exception):
            raise item
        return dict(item)

    async def close_all() -> None:
        drops.append(("channels", len(polls)))

    async def dispose_all() -> None:
        drops.append(("leases", len(polls)))

    async def reconnect_wait(delay: float) -> None:   # recorded, not slept
        waits.append((len(polls), delay))

    poll_loop.machine.poll = poll  # type: ignore[method-assign]
    poll_loop.reconnect_wait = reconnect_wait  # type: ignore[method-assign]
    poll_loop.gateways.close_all = close_all  # type: ignore[method-assign]
    poll_loop.leases.dispose_all = dispose_all  # type: ignore[method-assign]
    try:
        code = await asyncio.wait_for(poll_loop.run(), 15)
    finally:
        await store.close()
    assert code == 1 and not script
    assert polls == [True, False, False, False, True, True, True, True, False]
    # channels and leases dropped after the epoch change (3), each error (4-7), the epoch change
    # at the reconnect (8) and at shutdown; never on a same-epoch poll (2)
    for what in ("channels", "leases"):
        assert [n for w, n in drops if w == what] == [3, 4, 5, 6, 7, 8, 9], drops
    # the reconnect wait (the configured delay) follows every failed poll, and only those; the
    # order of polls and waits is the evidence, not the wall clock
    failed = [i for i, item in enumerate(SCRIPT, start=1) if isinstance(item, ServerError)
              and item.code != "runner_unauthorized"]     # that one exits at once
    assert failed == [4, 5, 6, 7] and waits == [(i, DELAY) for i in failed], waits
    err = capsys.readouterr().err
    assert "instance retired" in err and "updating" in err and "reconnecting" in err
    assert err.count("connected (") == 2 and "runner_unauthorized" in err


async def test_stop_during_reconnect_wait_is_prompt(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(timings, "RECONNECT_DELAY", 30.0)
    store = await LedgerStore.open(str(tmp_path / "l.sqlite3"))
    poll_loop = PollLoop(parse_config(CFG), store, "inst")
    failed = asyncio.Event()

    async def poll(reset: bool) -> dict[str, Any]:
        failed.set()
        raise ServerError(503, "service_stopping", "stopping")

    poll_loop.machine.poll = poll  # type: ignore[method-assign]
    try:
        run = asyncio.create_task(poll_loop.run())
        await asyncio.wait_for(failed.wait(), 5)
        poll_loop.stop()
        assert await asyncio.wait_for(run, 5) == 0
    finally:
        await store.close()
