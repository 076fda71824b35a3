"""The sync bridge: results, exceptions, timeouts, entered contexts and a clean shutdown."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator

import pytest

from conformance.portal import Portal, Stopped, resume_calls, stop_calls


async def add(a: int, b: int) -> int:
    await asyncio.sleep(0)
    return a + b


async def boom() -> None:
    raise ValueError("from the loop")


def test_calls_results_exceptions_and_thread() -> None:
    with Portal(name="portal-under-test") as portal:
        assert portal.call(add, 2, 3) == 5
        assert portal.run(add(4, 5)) == 9
        with pytest.raises(ValueError, match="from the loop"):
            portal.call(boom)
        loop_thread = portal.call_sync(threading.current_thread)  # runs on the loop
        assert loop_thread is not threading.current_thread()
    assert not portal.running
    assert not loop_thread.is_alive()


def test_a_call_that_overruns_is_cancelled() -> None:
    cancelled = threading.Event()

    async def forever() -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    with Portal() as portal:
        with pytest.raises(TimeoutError):
            portal.call(forever, timeout=0.05)
        assert cancelled.wait(10)
        assert portal.call(add, 1, 1) == 2  # the portal still works


def test_a_wait_that_times_out_inside_the_call_keeps_its_own_message() -> None:
    """Since 3.11 ``concurrent.futures.TimeoutError is TimeoutError``: an inner bounded wait
    that fails within the call's bound is the call's own error, not the portal's overrun."""

    async def inner_wait() -> None:
        try:
            await asyncio.wait_for(asyncio.Event().wait(), 0.01)
        except TimeoutError:
            raise TimeoutError("waited 0.01s for the event") from None

    with Portal() as portal:
        with pytest.raises(TimeoutError, match="waited 0.01s for the event"):
            portal.call(inner_wait, timeout=30)
        with pytest.raises(TimeoutError, match="did not finish within"):
            portal.call(asyncio.sleep, 5, timeout=0.05)


def test_entered_contexts_exit_last_first_at_close() -> None:
    events: list[str] = []

    @contextlib.asynccontextmanager
    async def resource(name: str) -> AsyncIterator[str]:
        events.append(f"enter {name}")
        try:
            yield name
        finally:
            await asyncio.sleep(0)
            events.append(f"exit {name}")

    with Portal() as portal:
        assert portal.enter(resource("a")) == "a"
        assert portal.enter(resource("b")) == "b"
        with portal.wrap(resource("c")) as c:
            assert c == "c"
        assert events[-1] == "exit c"
    assert events == ["enter a", "enter b", "enter c", "exit c", "exit b", "exit a"]


def test_not_running() -> None:
    portal = Portal()
    with pytest.raises(RuntimeError, match="not running"):
        portal.call(add, 1, 2)
    portal.close()  # closing an unstarted portal is fine


def test_stopped_calls_end_at_once_and_resume() -> None:
    """``stop_calls``: a call waiting on the loop raises ``Stopped`` (a BaseException, which
    Hypothesis does not shrink or save) and its task is cancelled; a new call raises at once;
    after ``resume_calls`` calls work again."""
    started, cancelled = threading.Event(), threading.Event()

    async def forever() -> None:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    caught: list[BaseException] = []

    def driver(portal: Portal) -> None:
        try:
            portal.call(forever)
        except BaseException as exc:  # noqa: BLE001 - what the driver's thread sees
            caught.append(exc)

    try:
        with Portal() as portal:
            thread = threading.Thread(target=driver, args=(portal,))
            thread.start()
            assert started.wait(10)
            stop_calls()
            thread.join(10)
            assert not thread.is_alive()
            assert [type(e) for e in caught] == [Stopped]
            assert not isinstance(caught[0], Exception)
            assert cancelled.wait(10)
            with pytest.raises(Stopped):
                portal.call(add, 1, 2)
            resume_calls()
            assert portal.call(add, 1, 2) == 3
    finally:
        resume_calls()
