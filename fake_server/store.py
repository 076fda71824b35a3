"""Durable state of the simulated control plane in SQLite (aiosqlite).

Rules:
- Runner tokens are never stored; only ``sha256(token)`` as lowercase hex.
- Account passwords are stored as scrypt hashes with a per-account salt.
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
import base64
import hashlib
import hmac
import json
import os
import secrets
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import aiosqlite

LOCAL_SOURCE_ID = "local"
LOCAL_SOURCE_NAME = "Local"
SYSTEM_OWNER = "_system"

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

# Salted scrypt, never plaintext. The work factor is modest on purpose: this is a test double
# whose accounts live in a temp database behind a loopback port, and every world of the suite
# hashes and verifies an admin password (n=2**14 cost ~85 ms of CPU each, n=2**11 ~10 ms).
_SCRYPT = {"n": 2**11, "r": 8, "p": 1}


class StoreError(Exception):
    """A refusal with the HTTP status and protocol code the caller should answer."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message


@dataclass(frozen=True)
class RunnerRecord:
    id: str
    name: str
    source_node_id: str
    allowed_profiles: tuple[str, ...]
    enabled: bool
    created_at: int
    features: tuple[str, ...]
    token_hash: str
    source_owner: str

    def summary(self, *, online: bool, features: Sequence[str] | None = None) -> dict[str, Any]:
        """The admin summary; never carries ``tokenHash`` or ``sourceOwner``.

        ``features`` is the live online state's list (upstream ``online?.features ?? []``); when
        not given, the list last stored for the current online state, and ``[]`` offline."""
        live = list(features) if features is not None else (list(self.features) if online else [])
        return {
            "id": self.id,
            "name": self.name,
            "sourceNodeId": self.source_node_id,
            "allowedProfiles": list(self.allowed_profiles),
            "enabled": self.enabled,
            "createdAt": self.created_at,
            "features": live,
            "online": online,
        }

    def __repr__(self) -> str:  # keep the hash out of logs
        return f"RunnerRecord(id={self.id!r}, name={self.name!r}, enabled={self.enabled})"


@dataclass(frozen=True)
class AccountRecord:
    name: str
    allowed_profiles: tuple[str, ...]
    is_admin: bool
    authorization_version: int
    active: bool


@dataclass(frozen=True)
class SourceRecord:
    id: str
    name: str
    paired: bool
    allowed_profiles: tuple[str, ...] | None  # None = any profile


def token_hash(token: str) -> str:
    """sha256 hex of a runner token."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def _hash_password(password: str) -> str:
    salt = os.urandom(16)
    digest = hashlib.scrypt(password.encode("utf-8"), salt=salt, **_SCRYPT)
    return f"scrypt${salt.hex()}${digest.hex()}"


def _verify_password(password: str, stored: str | None) -> bool:
    # Always do the work, so timing does not tell a missing account from a wrong password.
    salt_hex, digest_hex = "00" * 16, "00" * 64
    if stored and stored.startswith("scrypt$") and stored.count("$") == 2:
        _, salt_hex, digest_hex = stored.split("$")
    try:
        salt, expected = bytes.fromhex(salt_hex), bytes.fromhex(digest_hex)
    except ValueError:
        return False
    got = hashlib.scrypt(password.encode("utf-8"), salt=salt, **_SCRYPT)
    return hmac.compare_digest(got, expected) and stored is not None


def _dump(items: Sequence[str] | None) -> str | None:
    return None if items is None else json.dumps(list(items))


def _load(text: str | None) -> tuple[str, ...] | None:
    return None if text is None else tuple(json.loads(text))


def _runner(row: aiosqlite.Row) -> RunnerRecord:
    return RunnerRecord(
        id=row["id"],
        name=row["name"],
        source_node_id=row["source_node_id"],
        allowed_profiles=tuple(json.loads(row["allowed_profiles"])),
        enabled=bool(row["enabled"]),
        created_at=int(row["created_at"]),
        features=tuple(json.loads(row["features"])),
        token_hash=row["token_hash"],
        source_owner=row["source_owner"],
    )


def _account(row: aiosqlite.Row) -> AccountRecord:
    return AccountRecord(
        name=row["name"],
        allowed_profiles=tuple(json.loads(row["allowed_profiles"])),
        is_admin=bool(row["is_admin"]),
        authorization_version=int(row["authorization_version"]),
        active=bool(row["active"]),
    )


def _source(row: aiosqlite.Row) -> SourceRecord:
    return SourceRecord(
        id=row["id"],
        name=row["name"],
        paired=bool(row["paired"]),
        allowed_profiles=_load(row["allowed_profiles"]),
    )


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
                    raise StoreError(404, "workspace_not_found", "source not found")
                if src["paired"]:
                    raise StoreError(409, "runner_source_invalid", "source cannot host a runner")
                cur = await self._db.execute(
                    "SELECT 1 FROM runners WHERE source_node_id = ? AND source_owner = ? AND enabled = 1",
                    (source_node_id, source_owner),
                )
                if await cur.fetchone() is not None:
                    raise StoreError(409, "runner_source_in_use", "source already has a runner")
                await self._db.execute(
                    "INSERT INTO runners (id, name, source_node_id, allowed_profiles, enabled,"
                    " created_at, features, token_hash, source_owner)"
                    " VALUES (?, ?, ?, ?, 1, ?, ?, ?, ?)",
                    (
                        record.id,
                        record.name,
                        record.source_node_id,
                        _dump(record.allowed_profiles),
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
        return await self._cached(self._runners, runner_id, "SELECT * FROM runners WHERE id = ?", _runner)

    async def list_runners(self) -> list[RunnerRecord]:
        cur = await self._db.execute("SELECT * FROM runners ORDER BY seq")
        return [_runner(r) for r in await cur.fetchall()]

    async def disable_runner(self, runner_id: str) -> bool:
        changed = await self._write(
            self._runners, runner_id, "UPDATE runners SET enabled = 0 WHERE id = ?", (runner_id,)
        )
        return changed > 0

    async def set_runner_profiles(self, runner_id: str, profiles: Sequence[str]) -> None:
        await self._write(
            self._runners, runner_id,
            "UPDATE runners SET allowed_profiles = ? WHERE id = ?", (_dump(profiles), runner_id),
        )

    async def set_runner_features(self, runner_id: str, features: Sequence[str]) -> None:
        await self._write(
            self._runners, runner_id,
            "UPDATE runners SET features = ? WHERE id = ?", (_dump(features), runner_id),
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
        pw = None if password is None else await asyncio.to_thread(_hash_password, password)
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
                    (name, _dump(allowed_profiles), int(is_admin), version, pw),
                )
            finally:
                self._forget(self._accounts, name)
        return AccountRecord(name, tuple(allowed_profiles), is_admin, version, True)

    async def get_account(self, name: str) -> AccountRecord | None:
        return await self._cached(self._accounts, name, "SELECT * FROM accounts WHERE name = ?", _account)

    async def set_account_profiles(self, name: str, profiles: Sequence[str]) -> None:
        await self._write(
            self._accounts, name,
            "UPDATE accounts SET allowed_profiles = ? WHERE name = ?", (_dump(profiles), name),
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
        ok = await asyncio.to_thread(_verify_password, password, stored)
        if not ok or row is None:
            return None
        return _account(row)

    # -- sources ---------------------------------------------------------------------------

    async def list_sources(self) -> list[SourceRecord]:
        cur = await self._db.execute("SELECT * FROM sources ORDER BY seq")
        return [_source(r) for r in await cur.fetchall()]

    async def get_source(self, source_id: str) -> SourceRecord | None:
        return await self._cached(self._sources, source_id, "SELECT * FROM sources WHERE id = ?", _source)

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
            (source_id, name, int(paired), _dump(allowed_profiles)),
        )
        return SourceRecord(
            source_id, name, paired, None if allowed_profiles is None else tuple(allowed_profiles)
        )


def b64url_token_ok(token: str) -> bool:
    """True if ``token`` looks like a 43-char base64url token (used by tests)."""
    try:
        return len(base64.urlsafe_b64decode(token + "=")) == 32
    except (ValueError, TypeError):
        return False
