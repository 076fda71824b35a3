"""Opaque team tool ids (protocol-reference §6).

Rule: the model only ever sees ``team_`` + the first 32 hex chars of sha256(``<token>:<real id>``).
The lease token is random per lease, so ids are stable within a lease and differ across leases;
the real id never leaves the runner toward Hermes.
"""
from __future__ import annotations

import hashlib
from collections.abc import Iterable

PREFIX = "team_"


def opaque_id(token: str, real_id: str) -> str:
    digest = hashlib.sha256(f"{token}:{real_id}".encode()).hexdigest()
    return PREFIX + digest[:32]


def id_map(token: str, real_ids: Iterable[str]) -> dict[str, str]:
    """Opaque id → real id for one lease."""
    return {opaque_id(token, real): real for real in real_ids}
