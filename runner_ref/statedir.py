"""The state directory and the single-instance lock (protocol 1 §1.5, §1.6).

Rules:
- The state lives in ``<dirname(runner.json)>/state/<runnerId>/`` with mode 0700.
- Before anything else opens, the runner takes ``BEGIN EXCLUSIVE`` with ``busy_timeout=0`` on
  ``service-instance.sqlite3`` (0600) and holds it for its whole life; the OS drops the lock
  when the process dies, so kill -9 never leaves a stale lock.
- A second process on the same state fails with :data:`MSG_LOCKED` (exit 1).
- ``service-instance.json`` (0600) names the holder; it is removed on exit only if it still names
  this pid and instance. Unlike upstream it does not hold the runner token (nothing reads it here,
  and a secret not written cannot leak).
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sqlite3
from dataclasses import dataclass

MSG_LOCKED = "this data is already used by another Yaoyao service"
LEDGER_FILE = "runner-commands.sqlite3"
LOCK_FILE = "service-instance.sqlite3"
INSTANCE_FILE = "service-instance.json"
VERSION = "1.0.0"


class LockedError(Exception):
    """Another live process holds this state directory."""


def state_dir_for(config_path: str, runner_id: str) -> str:
    return os.path.join(os.path.dirname(os.path.abspath(config_path)), "state", runner_id)


def _private_file(path: str) -> None:
    fd = os.open(path, os.O_CREAT | os.O_WRONLY, 0o600)
    os.close(fd)
    os.chmod(path, 0o600)


@dataclass
class StateDir:
    path: str
    instance_id: str
    _lock: sqlite3.Connection | None = None

    @property
    def ledger_path(self) -> str:
        return os.path.join(self.path, LEDGER_FILE)

    def acquire(self) -> None:
        """Create the directory (0700) and take the exclusive lock, or raise LockedError."""
        os.makedirs(self.path, mode=0o700, exist_ok=True)
        os.chmod(self.path, 0o700)
        lock_path = os.path.join(self.path, LOCK_FILE)
        _private_file(lock_path)
        conn = sqlite3.connect(lock_path, timeout=0, isolation_level=None)
        try:
            conn.execute("PRAGMA busy_timeout=0")
            conn.execute("BEGIN EXCLUSIVE")
        except sqlite3.OperationalError:
            conn.close()
            raise LockedError(MSG_LOCKED) from None
        self._lock = conn
        info = {
            "protocol": 1, "instanceId": self.instance_id, "pid": os.getpid(),
            "dataKey": hashlib.sha256(os.path.realpath(self.path).encode()).hexdigest(),
            "version": VERSION, "desktopOwned": False, "maintenanceProtocol": 1,
        }
        tmp = os.path.join(self.path, INSTANCE_FILE + ".tmp")
        _private_file(tmp)
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(info, f)
        os.replace(tmp, os.path.join(self.path, INSTANCE_FILE))

    def release(self) -> None:
        """Remove the instance file if it still names us, then drop the lock."""
        path = os.path.join(self.path, INSTANCE_FILE)
        with contextlib.suppress(OSError, ValueError):
            with open(path, encoding="utf-8") as f:
                info = json.load(f)
            if info.get("pid") == os.getpid() and info.get("instanceId") == self.instance_id:
                os.remove(path)
        if self._lock is not None:
            with contextlib.suppress(sqlite3.Error):
                self._lock.execute("ROLLBACK")
            self._lock.close()
            self._lock = None
