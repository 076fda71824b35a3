"""Status lines on stderr: ``<ISO time> <message>``, one per status change (protocol 1 §1.8).

Rules: nothing is written to stdout; every line passes through :func:`redact`, which replaces
every registered secret (runner token, Hermes password, Hermes session token) — a second guard
behind the rule that no message is ever built from a secret.
"""
from __future__ import annotations

import datetime as _dt
import sys

CONNECTED = "connected (执行节点已连接)"
STOPPED = "stopped (执行节点已停止)"
RECONNECTING = "reconnecting"

_secrets: set[str] = set()


def add_secret(value: str | None) -> None:
    if value and len(value) >= 4:
        _secrets.add(value)


def redact(text: str) -> str:
    for s in sorted(_secrets, key=len, reverse=True):
        if s in text:
            text = text.replace(s, "[redacted]")
    return text


def emit(message: str) -> None:
    stamp = _dt.datetime.now(_dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    try:
        sys.stderr.write(f"{stamp} {redact(message)}\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
