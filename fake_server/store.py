"""Durable state of the simulated control plane in SQLite (aiosqlite).

Rules:
- Runner tokens are never stored; only ``sha256(token)`` as lowercase hex.
- Account passwords are stored as scrypt hashes with a per-account salt (the records, their row
  mapping and the hashing are ``fake_server/records.py``).
- One *enabled* runner per source owner (``_system`` for ``local``, else the creating admin):
  the check and the insert run in one ``BEGIN IMMEDIATE`` transaction, so two admins racing
  cannot both win.
- Records survive a restart of the fake server as long as the same db path is used.
- Runner, account and source records are cached in memory once read (the machine API reads
  them on every request). SQLite stays the source of truth: a new ``Store`` starts empty, and
  every write through this API drops the written record from the cache *after* the write, and
  bumps a generation counter so that a read racing a write never caches what it read. Writes
  that bypass this API are not seen by an open ``Store``.
"""

from __future__ import annotations

import asyncio
import secrets
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import aiosqlite

from . import codes
from .records import (
    LOCAL_SOURCE_ID,
    LOCAL_SOURCE_NAME,
    SYSTEM_OWNER,
    AccountRecord,
    RunnerRecord,
    SourceRecord,
    StoreError,
    account_of,
    b64url_token_ok,
    dump_list,
    hash_password,
    runner_of,
    source_of,
    token_hash,
    verify_password,
)

__all__ = ["LOCAL_SOURCE_ID", "LOCAL_SOURCE_NAME", "SYSTEM_OWNER", "AccountRecord", "RunnerRecord",
           "SourceRecord", "Store", "StoreError", "b64url_token_ok", "token_hash"]


_SCHEMA = """
CREATE TABLE IF NOT EXISTS runners (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    name TEXT NOT NULL,
    source_node_id TEXT NOT NULL,
    allowed_profiles TEXT NOT NULL,
    enabled INTEGER NOT NULL,
    created_at INTEGER NOT NULL,
    features TEXT NOT NULL,
    token_hash TEXT NOT NULL,
    source_owner TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS accounts (
    name TEXT PRIMARY KEY,
    allowed_profiles TEXT NOT NULL,
    is_admin INTEGER NOT NULL,
    authorization_version INTEGER NOT NULL,
    active INTEGER NOT NULL,
    password_hash TEXT
);
CREATE TABLE IF NOT EXISTS sources (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    name TEXT NOT NULL,
    paired INTEGER NOT NULL,
    allowed_profiles TEXT
);
"""

_R = TypeVar("_R")



class Store:
    """Async SQLite store of runners, accounts and sources."""

    def __init__(self, db: aiosqlite.Connection, path: Path) -> None:
        self._db = db
        self.path = path
        self._lock = asyncio.Lock()
        self._runners: dict[str, RunnerRecord] = {}
        self._accounts: dict[str, AccountRecord] = {}
        self._sources: dict[str, SourceRecord] = {}
        self._generation = 0

    @property
    def writes(self) -> int:
        """Writes so far (runners, accounts, sources): a harness compares two readings to tell
        whether anything changed the store in between."""
        return self._generation

    def _forget(self, cache: dict[str, Any], key: str) -> None:
        """Called after every write: drop the record; reads in flight will not cache theirs."""
        self._generation += 1
        cache.pop(key, None)

    async def _cached(
        self, cache: dict[str, _R], key: str, sql: str, record: Callable[[aiosqlite.Row], _R]
    ) -> _R | None:
        """The record ``sql`` selects by ``key``, from ``cache`` when there; a read that a write
        overtook (the generation moved) is returned but not cached."""
        hit = cache.get(key)
        if hit is not None:
            return hit
        gen = self._generation
        cur = await self._db.execute(sql, (key,))
        row = await cur.fetchone()
        if row is None:
            return None
        found = record(row)
        if gen == self._generation:
            cache[key] = found
        return found

    async def _write(self, cache: dict[str, Any], key: str, sql: str, params: tuple[Any, ...]) -> int:
        """One write under the lock, then forget ``key``'s cached record; returns rows changed."""
        async with self._lock:
            try:
                cur = await self._db.execute(sql, params)
            finally:
                self._forget(cache, key)
            return cur.rowcount or 0

    @classmethod
    async def open(cls, path: str | Path) -> Store:
        p = Path(path)
        db = await aiosqlite.connect(str(p), isolation_level=None)
        db.row_factory = aiosqlite.Row
        await db.execute("PRAGMA journal_mode=WAL")
        await db.execute("PRAGMA busy_timeout=5000")
        await db.executescript(_SCHEMA)
        await db.execute(
            "INSERT OR IGNORE INTO sources (id, name, paired, allowed_profiles) VALUES (?, ?, 0, NULL)",
            (LOCAL_SOURCE_ID, LOCAL_SOURCE_NAME),
        )
        return cls(db, p)

    async def close(self) -> None:
        await self._db.close()

    # -- runners ---------------------------------------------------------------------------

    async def create_runner(
        self, *, name: str, source_node_id: str, allowed_profiles: Sequence[str], owner: str
    ) -> tuple[RunnerRecord, str]:
        """Register a runner; returns the record and the token (shown once, never stored)."""
        token = secrets.token_urlsafe(32)  # 32 bytes → 43 base64url chars
        source_owner = SYSTEM_OWNER if source_node_id == LOCAL_SOURCE_ID else owner
        record = RunnerRecord(
            id=str(uuid.uuid4()),
            name=name,
            source_node_id=source_node_id,
            allowed_profiles=tuple(allowed_profiles),
            enabled=True,
            created_at=int(time.time() * 1000),
            features=(),
            token_hash=token_hash(token),
            source_owner=source_owner,
        )
        async with self._lock:
            await self._db.execute("BEGIN IMMEDIATE")
            try:
                cur = await self._db.execute(
                    "SELECT paired FROM sources WHERE id = ?", (source_node_id,)
                )
                src = await cur.fetchone()
                if src is None:
                    raise StoreError(codes.WORKSPACE_NOT_FOUND, "source not found")
                if src["paired"]:
                    raise StoreError(codes.RUNNER_SOURCE_INVALID)
                cur = await self._db.execute(
                    "SELECT 1 FROM runners WHERE source_node_id = ? AND source_owner = ? AND enabled = 1",
                    (source_node_id, source_owner),
                )
                if await cur.fetchone() is not None:
                    raise StoreError(codes.RUNNER_SOURCE_IN_USE)
                await self._db.execute(
                    "INSERT INTO runners (id, name, source_node_id, allowed_profiles, enabled,"
                    " created_at, features, token_hash, source_owner)"
                    " VALUES (?, ?, ?, ?, 1, ?, ?, ?, ?)",
                    (
                        record.id,
                        record.name,
                        record.source_node_id,
                        dump_list(record.allowed_profiles),
                        record.created_at,
                        "[]",
                        record.token_hash,
                        record.source_owner,
                    ),
                )
                await self._db.execute("COMMIT")
            except BaseException:
                await self._db.execute("ROLLBACK")
                raise
            finally:
                self._forget(self._runners, record.id)
        return record, token

    async def get_runner(self, runner_id: str) -> RunnerRecord | None:
        return await self._cached(self._runners, runner_id, "SELECT * FROM runners WHERE id = ?", runner_of)

    async def list_runners(self) -> list[RunnerRecord]:
        cur = await self._db.execute("SELECT * FROM runners ORDER BY seq")
        return [runner_of(r) for r in await cur.fetchall()]

    async def disable_runner(self, runner_id: str) -> bool:
        changed = await self._write(
            self._runners, runner_id, "UPDATE runners SET enabled = 0 WHERE id = ?", (runner_id,)
        )
        return changed > 0

    async def set_runner_profiles(self, runner_id: str, profiles: Sequence[str]) -> None:
        await self._write(
            self._runners, runner_id,
            "UPDATE runners SET allowed_profiles = ? WHERE id = ?", (dump_list(profiles), runner_id),
        )

    async def set_runner_features(self, runner_id: str, features: Sequence[str]) -> None:
        await self._write(
            self._runners, runner_id,
            "UPDATE runners SET features = ? WHERE id = ?", (dump_list(features), runner_id),
        )

    # -- accounts --------------------------------------------------------------------------

    async def create_account(
        self,
        name: str,
        *,
        allowed_profiles: Sequence[str],
        is_admin: bool = False,
        password: str | None = None,
    ) -> AccountRecord:
        """Create or replace an account (authorization version starts at 1, or is bumped)."""
        pw = None if password is None else await asyncio.to_thread(hash_password, password)
        async with self._lock:
            cur = await self._db.execute(
                "SELECT authorization_version FROM accounts WHERE name = ?", (name,)
            )
            row = await cur.fetchone()
            version = 1 if row is None else int(row[0]) + 1
            try:
                await self._db.execute(
                    "INSERT OR REPLACE INTO accounts (name, allowed_profiles, is_admin,"
                    " authorization_version, active, password_hash) VALUES (?, ?, ?, ?, 1, ?)",
                    (name, dump_list(allowed_profiles), int(is_admin), version, pw),
                )
            finally:
                self._forget(self._accounts, name)
        return AccountRecord(name, tuple(allowed_profiles), is_admin, version, True)

    async def get_account(self, name: str) -> AccountRecord | None:
        return await self._cached(self._accounts, name, "SELECT * FROM accounts WHERE name = ?", account_of)

    async def set_account_profiles(self, name: str, profiles: Sequence[str]) -> None:
        await self._write(
            self._accounts, name,
            "UPDATE accounts SET allowed_profiles = ? WHERE name = ?", (dump_list(profiles), name),
        )

    async def bump_authorization(self, name: str) -> int:
        """Increase the account's authorization version; returns the new version (0 if unknown)."""
        async with self._lock:
            try:
                await self._db.execute(
                    "UPDATE accounts SET authorization_version = authorization_version + 1 WHERE name = ?",
                    (name,),
                )
            finally:
                self._forget(self._accounts, name)
            cur = await self._db.execute(
                "SELECT authorization_version FROM accounts WHERE name = ?", (name,)
            )
            row = await cur.fetchone()
            return 0 if row is None else int(row[0])

    async def set_account_active(self, name: str, active: bool) -> None:
        await self._write(
            self._accounts, name, "UPDATE accounts SET active = ? WHERE name = ?", (int(active), name)
        )

    async def check_password(self, name: str, password: str) -> AccountRecord | None:
        """The account if ``password`` matches (constant time, even for unknown names)."""
        cur = await self._db.execute("SELECT * FROM accounts WHERE name = ?", (name,))
        row = await cur.fetchone()
        stored = None if row is None else row["password_hash"]
        ok = await asyncio.to_thread(verify_password, password, stored)
        if not ok or row is None:
            return None
        return account_of(row)

    # -- sources ---------------------------------------------------------------------------

    async def list_sources(self) -> list[SourceRecord]:
        cur = await self._db.execute("SELECT * FROM sources ORDER BY seq")
        return [source_of(r) for r in await cur.fetchall()]

    async def get_source(self, source_id: str) -> SourceRecord | None:
        return await self._cached(self._sources, source_id, "SELECT * FROM sources WHERE id = ?", source_of)

    async def add_source(
        self,
        source_id: str,
        name: str,
        *,
        paired: bool = False,
        allowed_profiles: Sequence[str] | None = None,
    ) -> SourceRecord:
        await self._write(
            self._sources, source_id,
            "INSERT OR REPLACE INTO sources (id, name, paired, allowed_profiles) VALUES (?, ?, ?, ?)",
            (source_id, name, int(paired), dump_list(allowed_profiles)),
        )
        return SourceRecord(
            source_id, name, paired, None if allowed_profiles is None else tuple(allowed_profiles)
        )
