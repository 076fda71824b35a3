"""Negative controls of the machine-API side: wire basics, reconnection, generations, admission.

Each row patches one seam of ``runner_ref`` (see :mod:`negative_controls.control`). The
replacement builders take the original so that everything but the one bug stays the reference.
"""
from __future__ import annotations

import asyncio
import contextlib
import sys
import types
import uuid
from typing import Any

from runner_ref import codes
from runner_ref.errors import ServerError
from runner_ref.ledger import NOT_ADMITTED, Gate

from .control import Control, const


# -- admission -------------------------------------------------------------------------------
def _skip_admit(_orig: Any) -> Any:
    async def _admit_gate(self: Any, cmd: dict[str, Any], epoch: str) -> bool:
        return True   # never asks the control plane
    return _admit_gate


def _ignore_allowed(_orig: Any) -> Any:
    async def _admit_gate(self: Any, cmd: dict[str, Any], epoch: str) -> bool:
        try:
            await self.machine.post("admit", {"id": cmd["id"]}, epoch=epoch)
        except ServerError:
            return False
        return True   # any 2xx is taken as a grant; {"allowed": false} is not read
    return _admit_gate


def _admit_in_parallel(_orig: Any) -> Any:
    async def _admit_and_execute(self: Any, cmd: dict[str, Any], epoch: str) -> Any:
        if not await self.gate_checks[Gate.DEADLINE](cmd, epoch):
            return NOT_ADMITTED
        admit = asyncio.ensure_future(self.gate_checks[Gate.ADMIT](cmd, epoch))
        run = asyncio.ensure_future(self.execute(cmd.get("kind"), cmd.get("payload"), epoch))
        if not await admit:   # optimistic: the work already started
            run.cancel()
            return NOT_ADMITTED
        return await run
    return _admit_and_execute


# -- the machine client --------------------------------------------------------------------
def _no_reset(orig: Any) -> Any:
    async def poll(self: Any, reset: bool) -> Any:
        return await orig(self, False)
    return poll


def _reset_first_only(orig: Any) -> Any:
    async def poll(self: Any, reset: bool) -> Any:
        first = not getattr(self, "_nc_polled", False)
        self._nc_polled = True
        return await orig(self, reset and first)
    return poll


def _upper_instance(orig: Any) -> Any:
    def __init__(self: Any, server_url: str, runner_id: str, token: str, instance_id: str,
                 features: str) -> None:
        orig(self, server_url, runner_id, token, instance_id.upper(), features)
    return __init__


def _sends_origin(orig: Any) -> Any:
    def __init__(self: Any, *args: Any) -> None:
        orig(self, *args)
        origin = self._base.split("/api/", 1)[0]
        for headers in (self._headers, *self._poll_headers.values()):
            headers["Origin"] = origin
    return __init__


def _stale_epoch(orig: Any) -> Any:
    def _headers_for_post(self: Any, epoch: str | None) -> dict[str, str]:
        first = self.__dict__.setdefault("_nc_epoch", epoch)   # built once, at connect
        return orig(self, first if first is not None else epoch)   # type: ignore[no-any-return]
    return _headers_for_post


def _first_command_only(orig: Any) -> Any:
    async def poll(self: Any, reset: bool) -> Any:
        body = await orig(self, reset)
        body["commands"] = body.get("commands", [])[:1]
        return body
    return poll


def _private_feature(orig: Any) -> Any:
    return lambda browser_enabled: orig(browser_enabled) + ",x-vendor-fast-path-v1"


def _prints_token(orig: Any) -> Any:
    async def poll(self: Any, reset: bool) -> Any:
        if not getattr(self, "_nc_logged", False):
            self._nc_logged = True
            sys.stderr.write(f"debug: GET {self._base}poll headers={self._poll_headers[reset]}\n")
            sys.stderr.flush()
        return await orig(self, reset)
    return poll


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


def _stable_instance(_orig: Any) -> Any:
    def uuid4() -> uuid.UUID:   # "persisted" per config: the same id after every restart
        return uuid.uuid5(uuid.NAMESPACE_URL, "negative-controls:" + " ".join(sys.argv))
    return types.SimpleNamespace(uuid4=uuid4)


# -- the poll loop ---------------------------------------------------------------------------
def _serial(_orig: Any) -> Any:
    def _spawn(self: Any, cmd: Any, epoch: str) -> None:
        if not isinstance(cmd, dict) or not isinstance(cmd.get("id"), str):
            return
        cid = cmd["id"]
        if cid in self._handling:
            return
        self._handling.add(cid)
        before = getattr(self, "_nc_last", None)

        async def one_after_another() -> None:
            if before is not None:
                await asyncio.gather(before, return_exceptions=True)
            await self._deliver(cmd, epoch)

        task = asyncio.create_task(one_after_another())
        self._nc_last = task
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
    return _spawn


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


PL = "runner_ref.poll_loop:PollLoop"
MC = "runner_ref.machine_client:MachineClient"

CONTROLS: tuple[Control, ...] = (
    Control("skip-admit", "wire", "Executes every delivered command without asking admit.",
            "a runner that trusts delivery as permission (admission added late, then skipped)",
            f"{PL}._admit_gate", ("WIR-006", "WIR-007"), _skip_admit),
    Control("ignore-admit-false", "wire",
            "Posts admit but takes any 2xx answer as a grant, never reading allowed:false.",
            "status-code-only checks of a JSON verdict; revoked work keeps running",
            f"{PL}._admit_gate", ("WIR-007", "CAN-009", "CAN-010"), _ignore_allowed),
    Control("admit-in-parallel", "wire",
            "Starts executing while the admit request is still in flight.",
            "optimistic execution to save a round trip; the effect precedes the grant",
            f"{PL}._admit_and_execute", ("WIR-006",), _admit_in_parallel),
    Control("no-deadline-check", "wire", "Never compares expiresAt with the clock.",
            "stale jobs run after a long outage (queued CI jobs starting hours late)",
            "runner_ref.poll_loop:deadline_ok", ("WIR-010",),
            const(lambda expires_at, now_ms: True)),
    Control("no-reset-header", "wire", "Never sends x-runner-reset: 1, not even on the first poll.",
            "a client that omits the restart signal, so the server keeps stale channels",
            f"{MC}.poll", ("WIR-001",), _no_reset),
    Control("reset-only-first-poll", "reconnection",
            "Sends x-runner-reset only on the first poll of the process, not after a failure.",
            "reconnect logic that forgets it lost its state (stale sessions after a blip)",
            f"{MC}.poll", ("REC-001", "REC-002"), _reset_first_only),
    Control("upper-case-instance", "wire", "Sends the instance id in upper case.",
            "a UUID library formatting upper case (Windows GUIDs); the server compares strings",
            f"{MC}.__init__", ("WIR-002",), _upper_instance),
    Control("sends-origin", "wire", "Adds an Origin header to every machine-API request.",
            "a runner built on a browser-style fetch that always sends Origin",
            f"{MC}.__init__", ("WIR-003",), _sends_origin),
    Control("stale-epoch-header", "generations",
            "Keeps sending the first epoch it saw after the epoch changed.",
            "headers built once at connect and cached for the process' life",
            f"{MC}._headers_for_post", ("GEN-005", "WIR-004"), _stale_epoch),
    Control("stable-instance-id", "wire",
            "Derives the instance id from its config, so a restart reuses it.",
            "an instance id persisted on disk: the new process impersonates the old one",
            "runner_ref.__main__:uuid", ("WIR-005",), _stable_instance),
    Control("serial-commands", "wire", "Runs the commands one at a time, in delivery order.",
            "a for-await loop over the batch: one slow job blocks every other (head-of-line)",
            f"{PL}._spawn", ("WIR-009", "CAN-002"), _serial),
    Control("first-command-only", "wire", "Handles only the first command of a poll answer.",
            "code written for a single-command response (commands[0])",
            f"{MC}.poll", ("WIR-011",), _first_command_only),
    Control("private-feature", "wire",
            "Advertises a vendor feature name that protocol 1 does not define.",
            "advertising private or future features the control plane may act on",
            "runner_ref.poll_loop:features_header", ("WIR-012",), _private_feature),
    Control("prints-token", "secrets",
            "Logs its first poll request with the headers, bearer token included.",
            "debug request logging left on (tokens in CI logs)",
            f"{MC}.poll", ("SEC-001", "CFG-001"), _prints_token),
    Control("exits-on-poll-error", "reconnection",
            "Treats every poll failure (5xx, dropped connection, bad body) as fatal: exit 1.",
            "no reconnect loop; a server deploy takes every runner offline",
            f"{MC}.poll", ("REC-001", "REC-002", "REC-008", "REC-010"), _exits_on_error),
    Control("retry-after-unauthorized", "generations",
            "Retries forever after runner_unauthorized instead of exiting 1.",
            "a disabled or deleted runner hammering the server (zombie agents)",
            f"{MC}.poll", ("GEN-008", "CFG-012"), _retries_unauthorized),
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
            f"{PL}._deliver", ("REC-004", "REC-007"), _forget_receipt_on_failed_post),
    Control("keep-channels-on-new-epoch", "generations",
            "Closes its channels only at shutdown, not when the epoch changes.",
            "stale sessions kept across a server restart (orphaned Hermes sockets)",
            f"{PL}._disconnect_local", ("GEN-001", "GEN-007", "GEN-009"),
            _drop_on_shutdown_only("channels")),
    Control("keep-leases-on-new-epoch", "generations",
            "Disposes its team-tool leases only at shutdown, not when the epoch changes.",
            "credentials of an old generation still honoured after a reset",
            f"{PL}._disconnect_local", ("GEN-002",), _drop_on_shutdown_only("leases")),
)
