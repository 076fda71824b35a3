"""Negative controls for the spec-coverage cases (the ``*-9NN`` cases of
``conformance/cases/test_spec_extra*.py``): one realistic bug each, caught by those cases."""
from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from .control import Control


def _last_poll_at_stop(orig: Any) -> Any:
    async def _shutdown(self: Any) -> None:
        with contextlib.suppress(Exception):   # "one last poll to pick up what is pending"
            await asyncio.wait_for(self.machine.poll(False), 1.0)
        await orig(self)
    return _shutdown


def _drain_before_disconnect(orig: Any) -> Any:
    from runner_ref import timings

    async def _shutdown(self: Any) -> None:
        if self._tasks:   # drain in-flight work while still "connected": pending admits run
            await asyncio.wait(set(self._tasks), timeout=timings.SHUTDOWN_DRAIN)
        await orig(self)
    return _shutdown


def _sticky_reset(orig: Any) -> Any:
    async def poll(self: Any, reset: bool) -> Any:
        return await orig(self, True)   # the reset flag is never cleared
    return poll


def _idle_backoff(orig: Any) -> Any:
    async def poll(self: Any, reset: bool) -> Any:
        body = await orig(self, reset)
        if isinstance(body, dict) and not body.get("commands"):
            await asyncio.sleep(40.0)   # nothing to do: back off before polling again
        return body
    return poll


CONTROLS: tuple[Control, ...] = (
    Control("polls-after-stop", "config-process",
            "Sends one more poll during its graceful stop, after the signal.",
            "a shutdown path that keeps taking work (jobs picked up by a dying agent)",
            "runner_ref.poll_loop:PollLoop._shutdown", ("CFG-904",), _last_poll_at_stop),
    Control("runs-commands-admitted-at-stop", "config-process",
            "At a graceful stop, drains pending commands before it stops accepting work, so a "
            "command admitted during the stop is executed.",
            "a job started on a host that is shutting down, then abandoned mid-way",
            "runner_ref.poll_loop:PollLoop._shutdown", ("CFG-905",), _drain_before_disconnect),
    Control("reset-on-every-poll", "wire",
            "Sends x-runner-reset: 1 on every poll (the reset flag is never cleared).",
            "a sticky reconnect flag: every poll drops the online state and its channels",
            "runner_ref.machine_client:MachineClient.poll", ("WIR-901",), _sticky_reset),
    Control("idle-poll-backoff", "reconnection",
            "Waits 40 s after an empty poll answer before polling again.",
            "an idle back-off longer than the watchdog: the runner flaps offline when idle",
            "runner_ref.machine_client:MachineClient.poll", ("REC-901",), _idle_backoff),
)
