"""Awaiting an append-only log: ``wait_for(predicate)`` answered on every append or update."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Iterable
from typing import Generic, TypeVar

T = TypeVar("T")
#: the harness's ``--timeout-multiplier`` (conformance/bounds.py sets it): every wait of a
#: caller on the control plane's logs and handles scales with it (default 1)
MULTIPLIER_ENV = "CONFORMANCE_TIMEOUT_MULTIPLIER"


def scaled(timeout: float | None) -> float | None:
    """A caller's bound times the run's multiplier (None stays None: no bound)."""
    try:
        factor = float(os.environ.get(MULTIPLIER_ENV) or 1.0)
    except ValueError:
        factor = 1.0
    return None if timeout is None else timeout * (factor if factor > 0 else 1.0)


class Waiters(Generic[T]):
    """Futures waiting for the first item that satisfies a predicate."""

    def __init__(self) -> None:
        self._waiting: list[tuple[Callable[[T], bool], asyncio.Future[T]]] = []

    def notify(self, item: T) -> None:
        for pred, fut in list(self._waiting):
            if fut.done():
                self._waiting.remove((pred, fut))
                continue
            try:
                hit = pred(item)
            except Exception as exc:  # a broken predicate fails its waiter, not the server
                fut.set_exception(exc)
                self._waiting.remove((pred, fut))
                continue
            if hit:
                fut.set_result(item)
                self._waiting.remove((pred, fut))

    async def wait_for(self, existing: Iterable[T], predicate: Callable[[T], bool], timeout: float | None) -> T:
        for item in existing:
            if predicate(item):
                return item
        fut: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        entry = (predicate, fut)
        self._waiting.append(entry)
        try:
            return await asyncio.wait_for(fut, scaled(timeout))
        finally:
            if entry in self._waiting:
                self._waiting.remove(entry)
