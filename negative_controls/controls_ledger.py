"""Negative controls of the command ledger: dedupe and incomplete receipts (protocol 1 §4)."""
from __future__ import annotations

import asyncio
import contextlib
import os
from typing import Any

from runner_ref.ledger import DeliveryDecision, Row, State
from runner_ref.poll_loop import result_body

from .control import Control, const

#: how long the write-behind control keeps a receipt in memory before writing it
WRITE_BEHIND = 5.0
#: how many completed receipts the receipt-cap control keeps (a property machine's example
#: replays a command with this many later rows only now and then: the soak's control);
#: ``$NC_RECEIPT_CAP`` sets another (the engine's soak test uses 1: most examples meet it)
RECEIPT_CAP = 10
CAP_ENV = "NC_RECEIPT_CAP"


def receipt_cap() -> int:
    return int(os.environ.get(CAP_ENV) or RECEIPT_CAP)


def _in_memory(orig: Any) -> Any:
    async def open(cls: Any, path: str) -> Any:
        return await orig(cls, ":memory:")
    return open


def _rerun_started(orig: Any) -> Any:
    def decide(row: Row | None, in_flight: str | None, fingerprint: str) -> DeliveryDecision:
        decision = orig(row, in_flight, fingerprint)
        if decision is DeliveryDecision.UNCERTAIN and row is not None \
                and row.state is State.STARTED:
            return DeliveryDecision.START   # "it never finished, so run it again"
        return decision   # type: ignore[no-any-return]
    return decide


def _upsert_claim(orig: Any) -> Any:
    def _sql_claim(n: int) -> str:
        sql: str = orig(n)
        return sql.replace("INSERT INTO", "INSERT OR REPLACE INTO").replace(
            " ON CONFLICT(id) DO NOTHING", "")
    return _sql_claim


def _rerun_inflight(orig: Any) -> Any:
    def _spawn(self: Any, cmd: Any, epoch: str) -> None:
        if isinstance(cmd, dict) and isinstance(cmd.get("id"), str) and cmd["id"] in self._handling:
            async def retry() -> None:   # the first attempt is presumed lost: run it again
                reply = await self._admit_and_execute(cmd, epoch)
                with contextlib.suppress(Exception):
                    await self.machine.post_encoded("result", result_body(cmd["id"], reply, None),
                                                    epoch=epoch)
            task = asyncio.create_task(retry())
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
            return
        orig(self, cmd, epoch)
    return _spawn


def _successes_only(orig: Any) -> Any:
    async def complete(self: Any, command_id: str, result_json: str) -> None:
        if result_json.startswith('{"error"'):
            return   # only successful runs get a receipt
        await orig(self, command_id, result_json)
    return complete


def _write_behind(orig: Any) -> Any:
    async def complete(self: Any, command_id: str, result_json: str) -> None:
        async def later() -> None:
            await asyncio.sleep(WRITE_BEHIND)
            with contextlib.suppress(Exception):
                await orig(self, command_id, result_json)
        task = asyncio.ensure_future(later())
        pending = self.__dict__.setdefault("_nc_pending", set())
        pending.add(task)
        task.add_done_callback(pending.discard)
    return complete


def _receipt_cap(orig: Any) -> Any:
    async def complete(self: Any, command_id: str, result_json: str) -> None:
        await orig(self, command_id, result_json)
        await self._db.execute(   # "housekeeping": keep the newest receipts, drop the rest
            "DELETE FROM commands WHERE state='complete' AND rowid NOT IN "
            "(SELECT rowid FROM commands ORDER BY rowid DESC LIMIT ?)", (receipt_cap(),))
    return complete


LS = "runner_ref.ledger_store"

# -- an in-flight copy, a ledger that cannot be written -------------------------------------
def _claim_ignoring_errors(orig: Any) -> Any:
    async def claim(self: Any, command_id: str, fingerprint: str, created_ms: int) -> Any:
        try:
            return await orig(self, command_id, fingerprint, created_ms)
        except Exception:   # noqa: BLE001 - "the ledger is best effort": treated as a new id
            return None
    return claim


CONTROLS: tuple[Control, ...] = (
    Control("ledger-in-memory", "receipts",
            "Keeps the command ledger in memory, so a restart forgets every receipt.",
            "receipts not durable: every redelivery after a restart runs again",
            f"{LS}:LedgerStore.open",
            ("DED-004", "INC-001", "INC-004", "PROP-003", "FLT-001"), _in_memory),
    Control("rerun-started-rows", "receipts",
            "Runs a command again when its row is 'started' after a restart.",
            "crash recovery that retries the interrupted job (duplicate deploys, double charges)",
            "runner_ref.poll_loop:decide",
            ("INC-001", "INC-002", "INC-003", "DED-004", "PROP-003", "FLT-001"),
            _rerun_started),
    Control("retire-deletes-rows", "receipts",
            "Retirement deletes old rows instead of keeping them as 'retired'.",
            "ledger garbage collection that forgets ids, so a late redelivery runs again",
            f"{LS}:SQL_RETIRE", ("INC-005", "PROP-003", "FLT-005"),
            const("DELETE FROM commands WHERE state='complete' AND created < ?")),
    Control("ignore-fingerprint", "dedupe",
            "Dedupes by command id only: another payload under the same id replays the reply.",
            "idempotency keys without a request fingerprint (reused ids get a wrong answer)",
            "runner_ref.poll_loop:command_fingerprint", ("DED-003", "DED-004", "PROP-002"),
            const(lambda cmd: f"id:{cmd.get('id')}")),
    Control("claim-upserts", "dedupe",
            "Claims with INSERT OR REPLACE, so every delivery overwrites the row and runs.",
            "duplicate job execution: an upsert where an insert-if-absent was needed",
            f"{LS}:_sql_claim",
            ("DED-002", "DED-006", "DED-007", "INC-001", "REC-004", "REC-007", "PROP-002"),
            _upsert_claim),
    Control("rerun-inflight-redelivery", "dedupe",
            "Runs a redelivered command again while the first delivery is still running.",
            "a job re-dispatched after a missed heartbeat runs twice (CI runner incidents)",
            "runner_ref.poll_loop:PollLoop._spawn",
            ("DED-005", "DED-001", "PROP-002"), _rerun_inflight),
    Control("refusals-not-stored", "dedupe",
            "Stores only successful replies; refusals and errors leave the row 'started'.",
            "receipts only for successes: a replayed refusal turns uncertain or re-admits",
            f"{LS}:LedgerStore.complete", ("DED-008", "INC-006", "PROP-002"), _successes_only),
    Control("write-behind-receipts", "receipts",
            f"Writes each receipt in the background {WRITE_BEHIND:g} s later; the result is posted at once.",
            "write-behind caching of receipts: a crash after reporting loses the receipt",
            f"{LS}:LedgerStore.complete", ("INC-004", "INC-006", "PROP-003"), _write_behind),
    Control("inflight-copy-ignored", "dedupe",
            "Ignores any second delivery of an id it is still running, whatever its payload.",
            "a conflicting request left unanswered until the control plane's deadline",
            "runner_ref.poll_loop:PollLoop._conflicts_in_flight", ("DED-901",),
            const(lambda self, cmd: False)),
    Control("ledger-failure-executes", "receipts",
            "Treats a ledger it cannot write as 'no row yet' and executes the command.",
            "best-effort bookkeeping: a locked or full database silently drops the receipt",
            "runner_ref.ledger_store:LedgerStore.claim", ("INC-901",), _claim_ignoring_errors),
    Control("receipt-cap", "dedupe",
            f"Keeps only the newest {RECEIPT_CAP} rows: every completion deletes older complete rows.",
            "an idempotency store capped by size, not age (an LRU of keys): a replay inside the "
            "hour of an evicted id runs again", f"{LS}:LedgerStore.complete", ("DED-902",),
            _receipt_cap),
)
