"""Negative controls of the machine API's failures and generations: reconnection (reset polls,
retries, the watchdog, event posts) and epochs (what a new generation must end).

Each row patches one seam of ``runner_ref`` (see :mod:`negative_controls.control`). The
replacement builders take the original so that everything but the one bug stays the reference.
"""
from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from runner_ref import codes
from runner_ref.errors import ServerError

from .control import Control, const

MC = "runner_ref.machine_client:MachineClient"
PL = "runner_ref.poll_loop:PollLoop"


def _reset_first_only(orig: Any) -> Any:
    async def poll(self: Any, reset: bool) -> Any:
        first = not getattr(self, "_nc_polled", False)
        self._nc_polled = True
        return await orig(self, reset and first)
    return poll


def _stale_epoch(orig: Any) -> Any:
    def _headers_for_post(self: Any, epoch: str | None) -> dict[str, str]:
        first = self.__dict__.setdefault("_nc_epoch", epoch)   # built once, at connect
        return orig(self, first if first is not None else epoch)   # type: ignore[no-any-return]
    return _headers_for_post


def _exits_on_error(orig: Any) -> Any:
    async def poll(self: Any, reset: bool) -> Any:
        try:
            return await orig(self, reset)
        except ServerError as exc:   # every poll failure ends the process like a 403
            raise ServerError(exc.status, codes.UNAUTHORIZED.code, exc.message) from None
    return poll


def _retries_unauthorized(orig: Any) -> Any:
    async def poll(self: Any, reset: bool) -> Any:
        try:
            return await orig(self, reset)
        except ServerError as exc:   # a 403 is taken for a transient failure
            if exc.code == codes.UNAUTHORIZED.code:
                raise ServerError(exc.status, codes.REQUEST_FAILED.code, exc.message) from None
            raise
    return poll


def _crash_on_malformed(orig: Any) -> Any:
    async def poll(self: Any, reset: bool) -> Any:
        try:
            return await orig(self, reset)
        except ServerError as exc:   # the parse error escapes the loop and kills the process
            if exc.message == "malformed poll response":
                raise SystemExit(1) from None
            raise
    return poll


def _forget_receipt_on_failed_post(_orig: Any) -> Any:
    from runner_ref.poll_loop import result_body

    async def _deliver(self: Any, cmd: dict[str, Any], epoch: str) -> None:
        cid = cmd["id"]
        try:
            reply, encoded = await self._handle(cmd, epoch)
            try:
                await self.machine.post_encoded("result", result_body(cid, reply, encoded),
                                                epoch=epoch)
            except ServerError:   # "not reported, so not done": run it again when redelivered
                with contextlib.suppress(Exception):
                    await self.store._db.execute("DELETE FROM commands WHERE id=?", (cid,))
        finally:
            self._handling.discard(cid)
    return _deliver


def _drop_on_shutdown_only(what: str) -> Any:
    def make(_orig: Any) -> Any:
        async def _disconnect_local(self: Any) -> None:
            self._connected = False
            stopping = self._stop.is_set()
            if what != "leases" or stopping:
                with contextlib.suppress(Exception):
                    await self.leases.dispose_all()
            if what != "channels" or stopping:
                await self.gateways.close_all()
        return _disconnect_local
    return make


# -- the poll cadence, event posts, the local disconnect ------------------------------------
def _idle_backoff(orig: Any) -> Any:
    async def poll(self: Any, reset: bool) -> Any:
        body = await orig(self, reset)
        if isinstance(body, dict) and not body.get("commands"):
            await asyncio.sleep(40.0)   # nothing to do: back off before polling again
        return body
    return poll


def _post_ignoring_errors(orig: Any) -> Any:
    from runner_ref.errors import ServerError

    async def _post(self: Any) -> None:
        while True:
            body = await self._events.get()
            if body is None:
                return
            try:
                await self._registry.post_event(body)
            except ServerError as exc:
                if exc.status == 410 and not body.get("closed"):
                    self._registry.close_later(self.id)
                    return
                # any other failure: the frame is dropped and the channel carries on
    return _post


def _close_all_forgetting(orig: Any) -> Any:
    async def close_all(self: Any) -> None:
        chans = list(self.channels.values())
        self.channels.clear()   # closed, but their ids are not tombstoned
        await asyncio.gather(*(self._close_tracked(ch) for ch in chans),
                             *list(self._background), return_exceptions=True)
    return close_all


# -- connected only after a reset poll ------------------------------------------------------
def _connected_only_after_reset(orig: Any) -> Any:
    async def _take_answer(self: Any, body: dict[str, Any], reset: bool) -> None:
        changed = self.machine.epoch is not None and body.get("epoch") != self.machine.epoch
        if reset:
            self._nc_lost = False
        elif changed:
            self._nc_lost = True   # the epoch change cleared the flag; only a reset poll sets it
        await orig(self, body, reset)
        if getattr(self, "_nc_lost", False):
            self._connected = False
    return _take_answer


CONTROLS: tuple[Control, ...] = (
    Control("reset-only-first-poll", "reconnection",
            "Sends x-runner-reset only on the first poll of the process, not after a failure.",
            "reconnect logic that forgets it lost its state (stale sessions after a blip)",
            f"{MC}.poll",
            ("REC-001", "REC-002", "GEN-003", "GEN-007", "REC-006"), _reset_first_only),
    Control("exits-on-poll-error", "reconnection",
            "Treats every poll failure (5xx, dropped connection, bad body) as fatal: exit 1.",
            "no reconnect loop; a server deploy takes every runner offline",
            f"{MC}.poll", ("REC-001", "REC-002", "REC-008", "REC-010", "GEN-003", "GEN-004",
                            "GEN-006", "GEN-007", "REC-006"), _exits_on_error),
    Control("crash-on-malformed-poll", "reconnection",
            "Dies when a poll answer is not the expected JSON.",
            "an unhandled parse error in the main loop (a proxy's HTML error page kills it)",
            f"{MC}.poll", ("REC-008",), _crash_on_malformed),
    Control("no-reconnect-delay", "reconnection", "Polls again at once after a failure.",
            "hot reconnect loop (thundering herd after an outage)",
            "runner_ref.timings:RECONNECT_DELAY", ("REC-009",), const(0.0)),
    Control("result-lost-on-5xx", "reconnection",
            "Deletes the receipt when the result post fails, so the redelivery runs again.",
            "'not reported means not done': duplicate job execution after a failed report",
            f"{PL}._deliver",
            ("REC-004", "REC-007", "PROP-005", "FLT-003"), _forget_receipt_on_failed_post),
    Control("stale-epoch-header", "generations",
            "Keeps sending the first epoch it saw after the epoch changed.",
            "headers built once at connect and cached for the process' life",
            f"{MC}._headers_for_post", ("GEN-005", "WIR-004", "PROP-004"), _stale_epoch),
    Control("retry-after-unauthorized", "generations",
            "Retries forever after runner_unauthorized instead of exiting 1.",
            "a disabled or deleted runner hammering the server (zombie agents)",
            f"{MC}.poll", ("GEN-008", "CFG-012"), _retries_unauthorized),
    Control("keep-channels-on-new-epoch", "generations",
            "Closes its channels only at shutdown, not when the epoch changes.",
            "stale sessions kept across a server restart (orphaned Hermes sockets)",
            f"{PL}._disconnect_local", ("GEN-001", "GEN-006", "GEN-007", "GEN-009", "PROP-004"),
            _drop_on_shutdown_only("channels")),
    Control("keep-leases-on-new-epoch", "generations",
            "Disposes its team-tool leases only at shutdown, not when the epoch changes.",
            "credentials of an old generation still honoured after a reset",
            f"{PL}._disconnect_local", ("GEN-002", "PROP-004"), _drop_on_shutdown_only("leases")),
    Control("idle-poll-backoff", "reconnection",
            "Waits 40 s after an empty poll answer before polling again.",
            "an idle back-off longer than the watchdog: the runner flaps offline when idle",
            "runner_ref.machine_client:MachineClient.poll", ("REC-901",), _idle_backoff),
    Control("event-errors-ignored", "reconnection",
            "Drops a frame whose event post failed (other than 410) and carries on.",
            "silent event loss on a flaky control plane, with no reconnect to resync",
            "runner_ref.gateway:Channel._post", ("REC-902",), _post_ignoring_errors),
    Control("no-tombstone-on-disconnect", "generations",
            "A local disconnect closes its channels without tombstoning their ids.",
            "a late open of an old generation's channel revives it after a reconnect",
            "runner_ref.gateway:Gateways.close_all", ("GEN-902",), _close_all_forgetting),
    Control("connected-only-after-reset", "generations",
            "After a new epoch arrives on a normal poll it disconnects locally and stays "
            "disconnected: every command of the new epoch is answered \"runner is "
            "disconnected\" until some poll fails.",
            "a 'connected' flag set on one path (the reset poll) and cleared on another (the "
            "epoch change); the reference runner had this bug until GEN-004 was made "
            "deterministic",
            "runner_ref.poll_loop:PollLoop._take_answer", ("GEN-004",),
            _connected_only_after_reset),
)
