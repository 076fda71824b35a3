"""Probes of the ledger controls (dedupe, incomplete receipts):
``negative_controls/controls_ledger.py`` (see ``nc_probes.py``)."""
from __future__ import annotations

import asyncio
from types import SimpleNamespace as NS
from typing import Any

from tests.negative_controls.nc_probes import _Ledger, _yield, probe


@probe("ledger-in-memory")
async def _memory() -> bool:
    from runner_ref.ledger_store import LedgerStore
    async with _Ledger() as ledger:
        await ledger.store.claim("c", "f", 0)
        again = await LedgerStore.open(ledger.path)
        try:
            return await again.get("c") is None
        finally:
            await again.close()


@probe("rerun-started-rows")
def _rerun_started() -> bool:
    from runner_ref import poll_loop
    from runner_ref.ledger import DeliveryDecision, Row, State
    row = Row("c", "f", State.STARTED, None, 0)
    return poll_loop.decide(row, None, "f") is DeliveryDecision.START


@probe("retire-deletes-rows")
async def _retire() -> bool:
    async with _Ledger() as ledger:
        store = ledger.store
        await store.claim("c", "f", 0)
        await store.complete("c", '{"result":1}')
        await store.retire(10**13, 0)
        return await store.get("c") is None


@probe("ignore-fingerprint")
def _fingerprint() -> bool:
    from runner_ref import poll_loop
    one = {"id": "a", "kind": "http", "payload": {"path": "/api/status"}}
    two = {"id": "a", "kind": "http", "payload": {"path": "/api/profiles"}}
    return poll_loop.command_fingerprint(one) == poll_loop.command_fingerprint(two)


@probe("claim-upserts")
async def _upsert() -> bool:
    async with _Ledger() as ledger:
        store = ledger.store
        await store.claim("c", "f", 0)
        return await store.claim("c", "f", 0) is None


@probe("rerun-inflight-redelivery")
async def _inflight() -> bool:
    from runner_ref.poll_loop import PollLoop
    ran: list[str] = []

    async def _admit_and_execute(cmd: Any, epoch: str) -> Any:
        ran.append(cmd["id"])
        return {"result": 1}

    async def post_encoded(route: str, data: bytes, epoch: str | None = None) -> Any:
        return None
    me = NS(_handling={"a"}, _tasks=set(), _admit_and_execute=_admit_and_execute,
            machine=NS(post_encoded=post_encoded), _conflicts_in_flight=lambda cmd: False)
    PollLoop._spawn(me, {"id": "a"}, "e")  # type: ignore[arg-type]
    await _yield()
    await asyncio.gather(*me._tasks)
    return ran == ["a"]


async def _stored_state(reply: str) -> Any:
    async with _Ledger() as ledger:
        store = ledger.store
        await store.claim("c", "f", 0)
        await store.complete("c", reply)
        return (await store.get("c")).state.value


@probe("refusals-not-stored")
async def _refusals() -> bool:
    return await _stored_state('{"error":{"message":"no","code":"x"}}') == "started"


@probe("receipt-cap")
async def _receipt_cap() -> bool:
    from negative_controls.controls_ledger import RECEIPT_CAP
    async with _Ledger() as ledger:
        store = ledger.store
        for i in range(RECEIPT_CAP + 1):
            await store.claim(f"c{i}", "f", i)
            await store.complete(f"c{i}", '{"result":1}')
        return await store.get("c0") is None and await store.get(f"c{RECEIPT_CAP}") is not None


@probe("write-behind-receipts")
async def _write_behind() -> bool:
    return await _stored_state('{"result":1}') == "started"


@probe("inflight-copy-ignored")
def _inflight_copy() -> bool:
    from runner_ref.fingerprint import command_fingerprint
    from runner_ref.poll_loop import PollLoop
    first = {"id": "a", "kind": "http", "payload": {"x": 1}, "expiresAt": 1}
    me = NS(_inflight={"a": (command_fingerprint(first), None)})
    other = {**first, "payload": {"x": 2}}
    return not PollLoop._conflicts_in_flight(me, other)  # type: ignore[arg-type]


@probe("ledger-failure-executes")
async def _claim_errors() -> bool:
    from runner_ref.ledger_store import LedgerStore

    async def _submit(*_a: Any) -> Any:
        raise RuntimeError("database is locked")
    try:
        await LedgerStore.claim(NS(_submit=_submit), "c", "f", 0)  # type: ignore[arg-type]
    except RuntimeError:
        return False
    return True
