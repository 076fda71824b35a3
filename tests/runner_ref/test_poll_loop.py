"""The poll loop's ledger handling in-process: joins, conflicts, replays, admission gates, kinds."""
from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from runner_ref import poll_loop as poll_loop_module
from runner_ref.config import parse_config
from runner_ref.errors import ServerError
from runner_ref.fingerprint import command_fingerprint
from runner_ref.ledger import ADMISSION_GATES, Gate, State
from runner_ref.ledger_store import LedgerStore
from runner_ref.poll_loop import PollLoop

CFG = {"protocol": 1, "serverURL": "http://127.0.0.1:9", "token": "t" * 40,
       "runnerId": "0b3c9a9e-2f51-4a8e-9a43-5e8f8e2f6b1c", "hermesURL": "http://127.0.0.1:9",
       "allowedProfiles": ["default"]}


class Harness:
    def __init__(self, poll: PollLoop) -> None:
        self.poll = poll
        self.admits: list[str] = []
        self.allowed = True
        self.executions: list[dict[str, Any]] = []
        self.executing = asyncio.Event()   # set as the first execution starts
        self.gate = asyncio.Event()
        self.gate.set()

        async def post(route: str, body: dict[str, Any], epoch: str | None = None,
                       timeout: float | None = None) -> Any:
            assert route == "admit" and epoch == "e1"
            self.admits.append(body["id"])
            if self.allowed == "error":
                raise ServerError(409, "runner_epoch_changed", "epoch")
            return {"allowed": self.allowed}

        async def http(payload: dict[str, Any]) -> Any:
            self.executions.append(payload)
            self.executing.set()
            await self.gate.wait()
            return {"status": 200, "n": len(self.executions)}

        poll.machine.post = post  # type: ignore[method-assign,assignment]
        poll.kinds["http"] = http
        poll.machine.epoch = "e1"
        poll._connected = True


@pytest.fixture()
async def h(tmp_path: Path) -> AsyncIterator[Harness]:
    store = await LedgerStore.open(str(tmp_path / "l.sqlite3"))
    poll = PollLoop(parse_config(CFG), store, "inst")
    yield Harness(poll)
    await poll.hermes.close()
    await poll.machine.close()
    await store.close()


def cmd(cid: str = "c1", kind: str = "http", **payload: Any) -> dict[str, Any]:
    return {"id": cid, "kind": kind, "payload": payload or {"path": "/api/status"},
            "expiresAt": int(time.time() * 1000) + 60_000}


async def test_concurrent_duplicates_share_one_execution(h: Harness) -> None:
    h.gate.clear()
    c = cmd()
    first = asyncio.create_task(h.poll.handle(dict(c), "e1"))
    second = asyncio.create_task(h.poll.handle(dict(c), "e1"))
    other = asyncio.create_task(h.poll.handle({**c, "payload": {"path": "/x"}}, "e1"))
    await h.executing.wait()
    assert (await other)["error"]["code"] == "idempotency_conflict"
    h.gate.set()
    a, b = await first, await second
    assert a == b == {"result": {"status": 200, "n": 1}}
    assert len(h.executions) == 1 and h.admits == ["c1"]
    again = await h.poll.handle(dict(c), "e1")
    assert again == a and len(h.executions) == 1 and h.admits == ["c1"]
    row = await h.poll.store.get("c1")
    assert row is not None and row.state is State.COMPLETE


async def test_admission_gates(h: Harness) -> None:
    expired = {**cmd("late"), "expiresAt": int(time.time() * 1000) - 1}
    assert (await h.poll.handle(expired, "e1"))["error"]["code"] == "runner_command_not_admitted"
    assert h.admits == []
    h.allowed = False
    assert (await h.poll.handle(cmd("no"), "e1"))["error"]["code"] == \
        "runner_command_not_admitted"
    h.allowed = "error"  # type: ignore[assignment]
    assert (await h.poll.handle(cmd("err"), "e1"))["error"]["code"] == \
        "runner_command_not_admitted"
    assert h.executions == []
    for cid in ("late", "no", "err"):   # refusals are receipts too
        row = await h.poll.store.get(cid)
        assert row is not None and row.state is State.COMPLETE


async def test_kinds_and_started_rows(h: Harness) -> None:
    assert (await h.poll.handle(cmd("u", kind="shell.exec"), "e1"))["error"]["code"] == \
        "runner_command_unknown"
    assert (await h.poll.handle(cmd("v", kind="local-vm.manage"), "e1"))["error"]["code"] == \
        "runner_feature_unavailable"
    bad = {**cmd("p"), "payload": [1]}
    assert (await h.poll.handle(bad, "e1"))["error"]["code"] == "runner_error"
    await h.poll.store.claim("crashed", "whatever", 0)
    c = cmd("crashed")
    c2 = cmd("crashed2")
    await h.poll.store.claim("crashed2", command_fingerprint(c2), 0)
    assert (await h.poll.handle(c, "e1"))["error"]["code"] == "idempotency_conflict"
    assert (await h.poll.handle(c2, "e1"))["error"]["code"] == "runner_command_uncertain"
    assert h.executions == []


async def test_disconnected_runner_fails_plainly(h: Harness) -> None:
    h.poll._connected = False
    out = await h.poll.handle(cmd("d"), "e1")
    assert out["error"]["code"] == "runner_error" and h.executions == []


async def test_retirement_at_every_256th_new_command(h: Harness) -> None:
    calls: list[int] = []
    real = h.poll.store.retire

    async def spy(now_ms: int, after_ms: int) -> None:
        calls.append(len(h.executions))
        assert after_ms == 3_600_000
        await real(now_ms, after_ms)

    h.poll.store.retire = spy  # type: ignore[method-assign]
    for i in range(600):
        await h.poll.handle(cmd(f"n{i}"), "e1")
        await h.poll.handle(cmd(f"n{i}"), "e1")   # a replay is not a new command
    assert calls == [255, 511], calls


async def test_the_admission_gates_table_is_what_runs(h: Harness,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The poll loop applies ``ledger.ADMISSION_GATES`` in order, one check per gate: the log of
    checks is the table, and a different table gives a different behaviour."""
    assert set(h.poll.gate_checks) == set(Gate) == set(ADMISSION_GATES)
    log: list[Gate] = []
    for gate, check in list(h.poll.gate_checks.items()):
        async def logged(c: dict[str, Any], e: str, gate: Gate = gate, check: Any = check) -> bool:
            log.append(gate)
            return bool(await check(c, e))
        h.poll.gate_checks[gate] = logged
    assert "result" in await h.poll.handle(cmd("ok"), "e1")
    assert log == list(ADMISSION_GATES) == [Gate.DEADLINE, Gate.ADMIT, Gate.DEADLINE]
    # without the deadline gates, an expired command is admitted and runs
    monkeypatch.setattr(poll_loop_module, "ADMISSION_GATES", (Gate.ADMIT,))
    expired = {**cmd("late"), "expiresAt": int(time.time() * 1000) - 1}
    assert "result" in await h.poll.handle(expired, "e1")
    assert h.admits == ["ok", "late"]
