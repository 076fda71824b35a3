"""The ledger's storage: ``runner-commands.sqlite3`` through one kept-open aiosqlite connection.

Durability. The database runs in WAL mode with ``synchronous=FULL``: every COMMIT fsyncs the
WAL before it returns, so a receipt acknowledged to the caller survives kill -9 *and* a power
cut. (``NORMAL`` would already survive kill -9, since the WAL is written before COMMIT
returns; FULL is chosen because a receipt is a promise to the control plane.)

Batched reads. Lookups are queued the same way and answered by one ``SELECT … WHERE id IN``
per batch, so a poll batch of N commands costs one round trip to the database thread, not N.

Group commit. Writes are queued and a single writer task commits everything queued so far in
one transaction; each caller's future resolves only after *its* COMMIT returned. Nothing is
acknowledged before it is durable, so batching is safe, and a burst of commands pays one fsync
instead of one each.
"""
from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass

import aiosqlite

from .ledger import Row, State

SCHEMA = ("CREATE TABLE IF NOT EXISTS commands(id TEXT PRIMARY KEY, fingerprint TEXT NOT NULL, "
          "state TEXT NOT NULL, result TEXT, created INTEGER NOT NULL)")
SQL_START = "INSERT OR IGNORE INTO commands(id, fingerprint, state, result, created) VALUES (?, ?, 'started', NULL, ?)"
SQL_COMPLETE = "UPDATE commands SET state='complete', result=? WHERE id=? AND state='started'"
READ_CHUNK = 500
SQL_RETIRE = "UPDATE commands SET state='retired', result=NULL WHERE state='complete' AND created < ?"


@dataclass
class _Write:
    sql: str
    params: tuple[object, ...]
    done: asyncio.Future[None]


class LedgerStore:
    """Rows of the ledger; every write returns only once durably committed."""

    def __init__(self, db: aiosqlite.Connection) -> None:
        self._db = db
        self._queue: list[_Write] = []
        self._wake = asyncio.Event()
        self._writer = asyncio.create_task(self._write_loop())
        self._reads: dict[str, list[asyncio.Future[Row | None]]] = {}
        self._read_wake = asyncio.Event()
        self._reader = asyncio.create_task(self._read_loop())
        self._closed = False

    @classmethod
    async def open(cls, path: str) -> LedgerStore:
        db = await aiosqlite.connect(path, isolation_level=None)
        await db.execute("PRAGMA journal_mode=WAL")
        await db.execute("PRAGMA synchronous=FULL")
        await db.execute(SCHEMA)
        return cls(db)

    async def get(self, command_id: str) -> Row | None:
        if self._closed:
            raise RuntimeError("ledger closed")
        fut: asyncio.Future[Row | None] = asyncio.get_running_loop().create_future()
        self._reads.setdefault(command_id, []).append(fut)
        self._read_wake.set()
        return await asyncio.shield(fut)

    async def _read_loop(self) -> None:
        while True:
            if not self._reads:
                if self._closed:
                    return
                self._read_wake.clear()
                await self._read_wake.wait()
                continue
            batch, self._reads = self._reads, {}
            ids = list(batch)
            try:
                found: dict[str, Row] = {}
                for i in range(0, len(ids), READ_CHUNK):
                    chunk = ids[i:i + READ_CHUNK]
                    marks = ",".join("?" * len(chunk))
                    for r in await self._db.execute_fetchall(
                            "SELECT id, fingerprint, state, result, created FROM commands "
                            f"WHERE id IN ({marks})", chunk):
                        found[r[0]] = Row(id=r[0], fingerprint=r[1], state=State(r[2]),
                                          result=r[3], created=r[4])
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

    async def start(self, command_id: str, fingerprint: str, created_ms: int) -> None:
        await self._write(SQL_START, (command_id, fingerprint, created_ms))

    async def complete(self, command_id: str, result_json: str) -> None:
        await self._write(SQL_COMPLETE, (result_json, command_id))

    async def retire(self, now_ms: int, after_ms: int) -> None:
        await self._write(SQL_RETIRE, (now_ms - after_ms,))

    async def _write(self, sql: str, params: tuple[object, ...]) -> None:
        if self._closed:
            raise RuntimeError("ledger closed")
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._queue.append(_Write(sql, params, fut))
        self._wake.set()
        await asyncio.shield(fut)

    async def _write_loop(self) -> None:
        while True:
            if not self._queue:
                if self._closed:
                    return
                self._wake.clear()
                await self._wake.wait()
                continue
            batch, self._queue = self._queue, []
            try:
                await self._db.execute("BEGIN IMMEDIATE")
                for sql in dict.fromkeys(w.sql for w in batch):
                    await self._db.executemany(sql, [w.params for w in batch if w.sql == sql])
                await self._db.execute("COMMIT")
            except Exception as exc:  # noqa: BLE001 - every waiter learns the failure
                with contextlib.suppress(Exception):
                    await self._db.execute("ROLLBACK")
                for w in batch:
                    if not w.done.done():
                        w.done.set_exception(exc)
                continue
            for w in batch:
                if not w.done.done():
                    w.done.set_result(None)

    async def close(self) -> None:
        """Flush queued writes, then close the connection."""
        self._closed = True
        self._wake.set()
        self._read_wake.set()
        with contextlib.suppress(Exception):
            await self._writer
        with contextlib.suppress(Exception):
            await self._reader
        await self._db.close()
