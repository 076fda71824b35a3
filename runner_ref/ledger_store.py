"""The ledger's storage: ``runner-commands.sqlite3`` through one kept-open aiosqlite connection.

Durability. The database runs in WAL mode with ``synchronous=FULL`` and autocommit: every write
statement is its own transaction, and its COMMIT fsyncs the WAL before the call returns, so a
receipt acknowledged to the caller survives kill -9 *and* a power cut. (``NORMAL`` would already
survive kill -9, since the WAL is written before COMMIT returns; FULL is chosen because a receipt
is a promise to the control plane.)

The SQL follows the ledger's table: every state literal and guard is derived from
:data:`runner_ref.ledger.TRANSITIONS` (``tests/runner_ref/test_ledger_store.py`` drives every
(state, event) pair through the store and compares with the table).

Claim = read + start, atomically. A new delivery *claims* its id: ``INSERT … ON CONFLICT(id)
DO NOTHING RETURNING id``. If the row was inserted, the caller owns a durable ``started`` row
(the ledger's "no row → start" rule, with no window between the read and the insert); otherwise
the existing row is read and handed to :func:`runner_ref.ledger.decide`.

Group commit. Claims, completions and retirements are queued; one writer task turns everything
queued so far into one multi-row statement per kind (one database round trip and one fsync per
kind and batch); each caller's future resolves only after the statement holding its row
returned. Nothing is acknowledged before it is durable, so batching is safe, and a burst of
commands pays one fsync instead of one each. Reads (:meth:`get`) are batched the same way.
"""
from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import aiosqlite

from .ledger import Event, LedgerError, Row, State, source_state, target_state

SCHEMA = ("CREATE TABLE IF NOT EXISTS commands(id TEXT PRIMARY KEY, fingerprint TEXT NOT NULL, "
          "state TEXT NOT NULL, result TEXT, created INTEGER NOT NULL)")
COLUMNS = "id, fingerprint, state, result, created"
CHUNK = 400  # rows per statement (well under SQLite's bound-parameter limit)


def _state(event: Event, end: str) -> str:
    """The SQL literal of the state ``event`` leaves (``end="from"``) or enters (``"to"``),
    taken from :data:`runner_ref.ledger.TRANSITIONS`."""
    state = source_state(event) if end == "from" else target_state(event)
    if state is None:
        raise LedgerError(f"{event.value} has no row to guard on")
    return f"'{state.value}'"


# START leaves "no row": the claim is an INSERT that does nothing when a row exists.
if source_state(Event.START) is not None:  # pragma: no cover - a table edit the SQL cannot follow
    raise LedgerError("START must leave the no-row state")
SQL_RETIRE = (f"UPDATE commands SET state={_state(Event.RETIRE, 'to')}, result=NULL "
              f"WHERE state={_state(Event.RETIRE, 'from')} AND created < ?")


def _sql_claim(n: int) -> str:
    values = ",".join([f"(?, ?, {_state(Event.START, 'to')}, NULL, ?)"] * n)
    return (f"INSERT INTO commands({COLUMNS}) VALUES {values} "
            "ON CONFLICT(id) DO NOTHING RETURNING id")


def _sql_complete(n: int) -> str:
    cases = " ".join(["WHEN ? THEN ?"] * n)
    marks = ",".join("?" * n)
    return (f"UPDATE commands SET state={_state(Event.COMPLETE, 'to')}, "
            f"result=CASE id {cases} END "
            f"WHERE id IN ({marks}) AND state={_state(Event.COMPLETE, 'from')}")


def _row(r: Iterable[Any]) -> Row:
    cid, fp, state, result, created = r
    return Row(id=cid, fingerprint=fp, state=State(state), result=result, created=created)


@dataclass
class _Op:
    kind: str                    # "claim" | "complete" | "retire"
    args: tuple[Any, ...]
    done: asyncio.Future[Any]


class LedgerStore:
    """Rows of the ledger; every write returns only once durably committed."""

    def __init__(self, db: aiosqlite.Connection) -> None:
        self._db = db
        self._ops: list[_Op] = []
        self._wake = asyncio.Event()
        self._reads: dict[str, list[asyncio.Future[Row | None]]] = {}
        self._read_wake = asyncio.Event()
        self._closed = False
        self._writer = asyncio.create_task(self._write_loop())
        self._reader = asyncio.create_task(self._read_loop())

    @classmethod
    async def open(cls, path: str) -> LedgerStore:
        # 0600 before SQLite opens it: its -wal and -shm files take the database file's mode.
        if path != ":memory:":  # SQLite's name for a database with no file
            os.close(os.open(path, os.O_CREAT | os.O_RDWR, 0o600))
            os.chmod(path, 0o600)
        db = await aiosqlite.connect(path, isolation_level=None)
        await db.execute("PRAGMA journal_mode=WAL")
        await db.execute("PRAGMA synchronous=FULL")
        await db.execute(SCHEMA)
        return cls(db)

    # -- API --------------------------------------------------------------------------------
    async def claim(self, command_id: str, fingerprint: str, created_ms: int) -> Row | None:
        """Insert a durable ``started`` row and return None, or return the row already there."""
        result: Row | None = await self._submit("claim", (command_id, fingerprint, created_ms))
        return result

    async def complete(self, command_id: str, result_json: str) -> None:
        """``started`` → ``complete`` with the reply (a no-op for any other state)."""
        await self._submit("complete", (command_id, result_json))

    async def retire(self, now_ms: int, after_ms: int) -> None:
        """Every complete row created before ``now - after`` → ``retired`` (reply dropped)."""
        await self._submit("retire", (now_ms - after_ms,))

    async def get(self, command_id: str) -> Row | None:
        if self._closed:
            raise RuntimeError("ledger closed")
        fut: asyncio.Future[Row | None] = asyncio.get_running_loop().create_future()
        self._reads.setdefault(command_id, []).append(fut)
        self._read_wake.set()
        return await fut   # a cancelled caller cancels only its own future (checked below)

    async def close(self) -> None:
        """Flush queued writes and reads, then close the connection."""
        self._closed = True
        self._wake.set()
        self._read_wake.set()
        with contextlib.suppress(Exception):
            await self._writer
        with contextlib.suppress(Exception):
            await self._reader
        await self._db.close()

    # -- writer -------------------------------------------------------------------------------
    async def _submit(self, kind: str, args: tuple[Any, ...]) -> Any:
        if self._closed:
            raise RuntimeError("ledger closed")
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._ops.append(_Op(kind, args, fut))
        self._wake.set()
        # no shield: a cancelled caller cancels its own future only; the writer skips futures
        # already done, and the row is written regardless
        return await fut

    async def _write_loop(self) -> None:
        while True:
            if not self._ops:
                if self._closed:
                    return
                self._wake.clear()
                await self._wake.wait()
                continue
            batch, self._ops = self._ops, []
            for kind, run in (("claim", self._claims), ("complete", self._completes),
                              ("retire", self._retires)):
                ops = [op for op in batch if op.kind == kind]
                if not ops:
                    continue
                try:
                    await run(ops)
                except Exception as exc:  # noqa: BLE001 - every waiter learns the failure
                    for op in ops:
                        if not op.done.done():
                            op.done.set_exception(exc)

    async def _claims(self, ops: list[_Op]) -> None:
        first: dict[str, _Op] = {}
        for op in ops:
            first.setdefault(op.args[0], op)
        inserted: set[str] = set()
        heads = list(first.values())
        for i in range(0, len(heads), CHUNK):
            chunk = heads[i:i + CHUNK]
            params = [a for op in chunk for a in op.args]
            rows = await self._db.execute_fetchall(_sql_claim(len(chunk)), params)
            inserted.update(r[0] for r in rows)
        existing = await self._select([cid for cid in first if cid not in inserted])
        for op in ops:
            cid = op.args[0]
            if op.done.done():
                continue
            if cid in inserted and first[cid] is op:
                op.done.set_result(None)
            else:
                op.done.set_result(existing.get(cid) or await self._select_one(cid))

    async def _completes(self, ops: list[_Op]) -> None:
        for i in range(0, len(ops), CHUNK):
            chunk = ops[i:i + CHUNK]
            params = [a for op in chunk for a in op.args] + [op.args[0] for op in chunk]
            await self._db.execute(_sql_complete(len(chunk)), params)
        for op in ops:
            if not op.done.done():
                op.done.set_result(None)

    async def _retires(self, ops: list[_Op]) -> None:
        await self._db.execute(SQL_RETIRE, (max(op.args[0] for op in ops),))
        for op in ops:
            if not op.done.done():
                op.done.set_result(None)

    # -- reader -------------------------------------------------------------------------------
    async def _select(self, ids: list[str]) -> dict[str, Row]:
        found: dict[str, Row] = {}
        for i in range(0, len(ids), CHUNK):
            chunk = ids[i:i + CHUNK]
            marks = ",".join("?" * len(chunk))
            for r in await self._db.execute_fetchall(
                    f"SELECT {COLUMNS} FROM commands WHERE id IN ({marks})", chunk):
                found[r[0]] = _row(r)
        return found

    async def _select_one(self, command_id: str) -> Row | None:
        return (await self._select([command_id])).get(command_id)

    async def _read_loop(self) -> None:
        while True:
            if not self._reads:
                if self._closed:
                    return
                self._read_wake.clear()
                await self._read_wake.wait()
                continue
            batch, self._reads = self._reads, {}
            try:
                found = await self._select(list(batch))
            except Exception as exc:  # noqa: BLE001 - every waiter learns the failure
                for futs in batch.values():
                    for f in futs:
                        if not f.done():
                            f.set_exception(exc)
                continue
            for cid, futs in batch.items():
                for f in futs:
                    if not f.done():
                        f.set_result(found.get(cid))
