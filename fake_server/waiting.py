"""Awaiting an append-only log: ``wait_for(predicate)`` answered on every append or update."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from typing import Generic, TypeVar

T = TypeVar("T")


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
            return await asyncio.wait_for(fut, timeout)
        finally:
            if entry in self._waiting:
                self._waiting.remove(entry)
