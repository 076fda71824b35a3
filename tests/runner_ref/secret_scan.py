"""The shared no-secret assertion: every byte a runner subprocess wrote is scanned for the runner
token, the Hermes password and every Hermes session token seen in the test (conftest runs it at
the teardown of every test that started a runner)."""
from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

MIN_SECRET = 8  # shorter strings are not secrets we generate, and would match by accident


def config_secrets(path: Path | None) -> list[str]:
    """The token and the Hermes password of a runner.json (any shape; unreadable → none)."""
    if path is None or not path.exists():
        return []
    try:
        raw: Any = json.loads(path.read_text())
    except (OSError, ValueError):
        return []
    found: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key in ("token", "password") and isinstance(value, str):
                    found.append(value)
                walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(raw)
    return found


def leaks(output: bytes, secrets: Iterable[str | None]) -> list[str]:
    """The secrets (as a short hint, never the value) present in ``output``."""
    hits = []
    for s in {s for s in secrets if s and len(s) >= MIN_SECRET}:
        if s.encode() in output:
            hits.append(f"{len(s)}-char secret starting {s[:3]!r}")
    return hits


def assert_no_secrets(output: bytes, secrets: Iterable[str | None], where: str = "") -> None:
    found = leaks(output, secrets)
    assert not found, f"secret(s) leaked to runner output {where}: {found}"


def scan(runners: Iterable[Any], hermeses: Iterable[Any]) -> None:
    """Every runner's output against every secret of every runner config and Hermes fixture."""
    runners = list(runners)
    secrets: list[str | None] = []
    for h in hermeses:
        secrets += [getattr(h, "session_token", None), getattr(h, "password", None),
                    *getattr(h, "tokens", [])]
    for r in runners:
        secrets += config_secrets(r.config_path)
    for r in runners:
        assert_no_secrets(r.output(), secrets, where=str(r.stderr_path))
