"""The control plane's records (runner, account, source), their SQLite row mapping, and the
secret handling they need; no I/O (``fake_server.store`` reads and writes them).

Rules:
- Runner tokens are never stored; only ``sha256(token)`` as lowercase hex (:func:`token_hash`).
- Account passwords are stored as scrypt hashes with a per-account salt; checking one always
  does the scrypt work, so timing does not tell a missing account from a wrong password.
- A runner record's ``repr`` and admin ``summary`` never carry the token hash.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from .codes import Code

LOCAL_SOURCE_ID = "local"
LOCAL_SOURCE_NAME = "Local"
SYSTEM_OWNER = "_system"

# The work factor is modest on purpose: this is a test double whose accounts live in a temp
# database behind a loopback port, and every world of the suite hashes and verifies an admin
# password (n=2**14 costs ~85 ms of CPU each, n=2**11 ~10 ms).
_SCRYPT = {"n": 2**11, "r": 8, "p": 1}


class Row(Protocol):
    """A SQLite row read by column name (``aiosqlite.Row``)."""

    def __getitem__(self, key: str) -> Any: ...


class StoreError(Exception):
    """A refusal with the HTTP status and protocol code the caller should answer."""

    def __init__(self, row: Code, message: str | None = None) -> None:
        super().__init__(row.message if message is None else message)
        self.status = row.status
        self.code = row.code
        self.message = row.message if message is None else message


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


def hash_password(password: str) -> str:
    salt = os.urandom(16)
    digest = hashlib.scrypt(password.encode("utf-8"), salt=salt, **_SCRYPT)
    return f"scrypt${salt.hex()}${digest.hex()}"


def verify_password(password: str, stored: str | None) -> bool:
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


def dump_list(items: Sequence[str] | None) -> str | None:
    return None if items is None else json.dumps(list(items))


def load_list(text: str | None) -> tuple[str, ...] | None:
    return None if text is None else tuple(json.loads(text))


def runner_of(row: Row) -> RunnerRecord:
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


def account_of(row: Row) -> AccountRecord:
    return AccountRecord(
        name=row["name"],
        allowed_profiles=tuple(json.loads(row["allowed_profiles"])),
        is_admin=bool(row["is_admin"]),
        authorization_version=int(row["authorization_version"]),
        active=bool(row["active"]),
    )


def source_of(row: Row) -> SourceRecord:
    return SourceRecord(
        id=row["id"],
        name=row["name"],
        paired=bool(row["paired"]),
        allowed_profiles=load_list(row["allowed_profiles"]),
    )


def b64url_token_ok(token: str) -> bool:
    """True if ``token`` looks like a 43-char base64url token (used by tests)."""
    try:
        return len(base64.urlsafe_b64decode(token + "=")) == 32
    except (ValueError, TypeError):
        return False
