"""``Portal``: a synchronous bridge into one background event loop.

Synchronous drivers (Hypothesis ``RuleBasedStateMachine`` rules, Playwright's sync API) cannot
``await``; they call ``portal.call(coro_fn, *args)`` and get the result (or the exception) back
in their own thread. It stands on AnyIO's ``BlockingPortal`` (asyncio backend): one thread, one
loop, started and stopped by the context manager.

Rules:
- Everything created through the portal (servers, sessions, events) lives on the portal's loop;
  touch it only through :meth:`Portal.call` (or :meth:`Portal.call_sync` for a plain function,
  which is how a caller reads state that is not thread-safe).
- :meth:`Portal.enter` enters an async context manager on the loop and exits it when the portal
  closes, last entered first.
- ``timeout`` bounds one call; when it passes, the call's task is cancelled and
  ``TimeoutError("portal call … did not finish within …")`` is raised. An exception the call
  itself raised (a ``TimeoutError`` of a bounded wait inside it too) is re-raised unchanged.
- Closing cancels what is still running, exits entered contexts and joins the thread.
- :func:`stop_calls` (an interrupted session, conformance/lanes.py) makes every call waiting or
  made from then on raise :class:`Stopped` at once, until :func:`resume_calls`: a synchronous
  driver (a property machine, a fault-matrix row) in a thread nobody can cancel ends at its next
  call instead of running on, and ``Stopped`` is a ``BaseException``, which Hypothesis does not
  take for a failure to shrink or save.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager, AbstractContextManager, ExitStack
from typing import Any, TypeVar

from anyio.from_thread import BlockingPortal, start_blocking_portal

T = TypeVar("T")


class Stopped(BaseException):
    """The session is stopping (an interrupt): a synchronous driver's call is abandoned."""


#: resolved while calls are stopped (:func:`stop_calls`); a new one on :func:`resume_calls`
_stopping: concurrent.futures.Future[None] = concurrent.futures.Future()


def stop_calls() -> None:
    """From now on every portal call of this process raises :class:`Stopped`."""
    if not _stopping.done():
        _stopping.set_result(None)


def resume_calls() -> None:
    global _stopping
    if _stopping.done():
        _stopping = concurrent.futures.Future()


class Portal:
    """``with Portal() as portal: portal.call(async_fn, *args)``."""

    def __init__(self, name: str = "conformance-portal") -> None:
        self.name = name
        self._stack = ExitStack()
        self._portal: BlockingPortal | None = None

    def start(self) -> Portal:
        if self._portal is None:
            cm: AbstractContextManager[BlockingPortal] = start_blocking_portal(name=self.name)
            self._portal = self._stack.enter_context(cm)
        return self

    def close(self) -> None:
        """Exit entered contexts (last first), cancel what still runs, join the thread."""
        portal, self._portal = self._portal, None
        if portal is None:
            return
        try:
            self._stack.close()  # contexts first, then the portal itself (LIFO)
        finally:
            self._stack = ExitStack()

    def __enter__(self) -> Portal:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def running(self) -> bool:
        return self._portal is not None

    def _require(self) -> BlockingPortal:
        if self._portal is None:
            raise RuntimeError("the portal is not running")
        return self._portal

    def call(self, fn: Callable[..., Awaitable[T]], *args: Any,
             timeout: float | None = None) -> T:
        """Run ``fn(*args)`` on the portal's loop and await it; its result, or its exception
        re-raised here."""
        portal = self._require()
        stopping = _stopping
        name = getattr(fn, "__qualname__", repr(fn))
        if stopping.done():
            raise Stopped(f"portal call {name}: the session is stopping")
        future: concurrent.futures.Future[T] = portal.start_task_soon(fn, *args)
        # Wait for the call first, then take its result: since Python 3.11
        # ``concurrent.futures.TimeoutError`` is the builtin ``TimeoutError``, so catching it
        # around ``future.result(timeout)`` would also catch (and mislabel as the portal's own)
        # a bounded wait that timed out inside the call.
        either: list[concurrent.futures.Future[Any]] = [future, stopping]
        done, _ = concurrent.futures.wait(either, timeout,
                                          return_when=concurrent.futures.FIRST_COMPLETED)
        if future not in done:
            future.cancel()
            if stopping.done():
                raise Stopped(f"portal call {name}: the session is stopping")
            raise TimeoutError(f"portal call {name} did not finish within {timeout}s")
        return future.result()

    def call_sync(self, fn: Callable[..., T], *args: Any, timeout: float | None = None) -> T:
        """Run a plain function on the portal's loop (to read state that is not thread-safe)."""

        async def wrap() -> T:
            return fn(*args)

        return self.call(wrap, timeout=timeout)

    def run(self, awaitable: Awaitable[T], timeout: float | None = None) -> T:
        """Await an already-made awaitable (a coroutine object) on the portal's loop."""

        async def wait() -> T:
            return await awaitable

        return self.call(wait, timeout=timeout)

    def soon(self, awaitable: Awaitable[T]) -> concurrent.futures.Future[T]:
        """Start awaiting ``awaitable`` on the loop now, without waiting: its result (or
        exception) arrives in the returned future (for a driver that must act meanwhile)."""

        async def wait() -> T:
            return await awaitable

        return self._require().start_task_soon(wait)

    def enter(self, cm: AbstractAsyncContextManager[T]) -> T:
        """Enter ``cm`` on the loop; it is exited when the portal closes (last entered first)."""
        portal = self._require()
        return self._stack.enter_context(portal.wrap_async_context_manager(cm))

    @contextlib.contextmanager
    def wrap(self, cm: AbstractAsyncContextManager[T]) -> Any:
        """``with portal.wrap(async_cm) as value:`` — a sync context around an async one."""
        with self._require().wrap_async_context_manager(cm) as value:
            yield value
