"""The secrets registry: every secret the harness minted or was given, by name.

Rules:
- A secret is a named string of at least :data:`MIN_SECRET` characters (shorter strings would
  match by accident and are not secrets the harness makes).
- :meth:`Secrets.redact` replaces every occurrence with :data:`REDACTED`, longest secret first, in
  text and, recursively, in JSON-like data (keys and values).
- :meth:`Secrets.find` names the secrets present in some bytes/text: the names, never the values,
  go into reports.
- This is the harness's one redactor: :func:`redact` and :func:`redact_data` apply the same rules
  to a plain collection of values (a foreign world's ``secrets``, a report's extra secrets).

Why 8 characters: every secret the harness mints (runner token and its sha256, admin password and
CSRF token, Hermes session token and password) is far longer, and a shorter "secret" would also
erase ordinary evidence — a status code, a route, ``true`` — and so hide the cause of a failure.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

MIN_SECRET = 8
REDACTED = "«redacted»"


@dataclass(frozen=True)
class Leak:
    """A secret (by name) found somewhere it must not be."""

    secret: str
    where: str

    def __str__(self) -> str:
        return f"{self.secret} in {self.where}"


class Secrets:
    """name → value; later values under one name are kept too (``token``, ``token#2``)."""

    @classmethod
    def of(cls, values: Iterable[object]) -> Secrets:
        """A registry of unnamed values (strings shorter than :data:`MIN_SECRET` are dropped)."""
        if isinstance(values, Secrets):
            return values
        out = cls()
        for value in values:
            out.add("secret", value if isinstance(value, str) else None)
        return out

    def __init__(self) -> None:
        self._by_name: dict[str, str] = {}
        self._longest_first: list[str] = []  # redact's order, kept on add

    def add(self, name: str, value: str | None) -> None:
        if not value or len(value) < MIN_SECRET or value in self._by_name.values():
            return
        key, n = name, 1
        while key in self._by_name:
            n += 1
            key = f"{name}#{n}"
        self._by_name[key] = value
        self._longest_first = sorted(self._by_name.values(), key=len, reverse=True)

    def update(self, other: Secrets) -> None:
        for name, value in other.items():
            self.add(name, value)

    def items(self) -> list[tuple[str, str]]:
        return list(self._by_name.items())

    @property
    def values(self) -> set[str]:
        return set(self._by_name.values())

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._by_name.values()))

    def __len__(self) -> int:
        return len(self._by_name)

    def __contains__(self, value: object) -> bool:
        return value in self._by_name.values()

    def find(self, data: bytes | str) -> list[str]:
        """Names of the secrets that occur in ``data``."""
        blob = data.encode() if isinstance(data, str) else data
        return [name for name, value in self._by_name.items() if value.encode() in blob]

    def leaks(self, data: bytes | str, where: str) -> list[Leak]:
        return [Leak(name, where) for name in self.find(data)]

    def redact(self, text: str) -> str:
        for value in self._longest_first:
            if value in text:
                text = text.replace(value, REDACTED)
        return text

    def redact_data(self, data: Any) -> Any:
        """A JSON-ready copy of ``data`` with every secret replaced (bytes are decoded)."""
        if isinstance(data, str):
            return self.redact(data)
        if isinstance(data, bytes):
            return self.redact(data.decode(errors="replace"))
        if isinstance(data, dict):
            return {self.redact(str(k)): self.redact_data(v) for k, v in data.items()}
        if isinstance(data, list | tuple | set | frozenset):
            return [self.redact_data(v) for v in data]
        if data is None or isinstance(data, bool | int | float):
            return data
        return self.redact(json.dumps(data, default=str))


def redact(text: str, secrets: Iterable[object]) -> str:
    """``text`` with every secret of ``secrets`` (a :class:`Secrets` or plain values) replaced."""
    return Secrets.of(secrets).redact(text)


def redact_data(data: Any, secrets: Iterable[object]) -> Any:
    """A JSON-ready copy of ``data`` with every secret of ``secrets`` replaced, recursively."""
    return Secrets.of(secrets).redact_data(data)
