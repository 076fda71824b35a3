"""The runner's run loop: poll, hand each command to the ledger, dispatch, post the result.

Rules (protocol 1 §1.7, §2, §3, §4):
- Poll with ``x-runner-reset: 1`` while locally disconnected (first poll, after any error).
  The first successful poll after that prints "connected".
- A poll that returns a different epoch first disconnects locally: every lease disposed, every
  channel closed. Any poll error does the same, waits 1 s, and polls again with a reset.
- ``runner_unauthorized`` is the only fatal error (exit 1); everything else reconnects forever.
- Every command runs in its own task, so a slow command never delays a close or an interrupt;
  an id already being handled is skipped when redelivered.
- Each command goes through the ledger (:mod:`runner_ref.ledger`): fingerprint, decision,
  ``started`` durably before admission, deadline / admit / deadline, execute, ``complete``
  durably, then the reply is posted. A failed result post is ignored (the command is
  redelivered and answered from the ledger).
- Kinds: :data:`KINDS` (below). The extension kinds of upstream (VM, browser, network) are known
  but unavailable here → 409 ``runner_feature_unavailable``; anything else → 400
  ``runner_command_unknown``. A non-coded exception becomes ``runner_error``.
- SIGTERM/SIGINT: stop polling, dispose leases, interrupt running sessions (≤3 s), close the
  channels, wait for in-flight commands, close the ledger, print "stopped", exit 0.
"""
from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Awaitable, Callable
from typing import Any

from . import codes, status, timings
from .allowlists import require_profile
from .codes import error_result
from .config import RunnerConfig
from .errors import CommandError, ServerError
from .fingerprint import command_fingerprint
from .gateway import Gateways
from .hermes import HermesClient
from .http_kind import run_http
from .ledger import (
    ADMISSION_GATES,
    CONFLICT,
    NOT_ADMITTED,
    UNCERTAIN,
    DeliveryDecision,
    Gate,
    RetireCounter,
    deadline_ok,
    decide,
)
from .ledger_store import LedgerStore
from .machine_client import MachineClient, features_header
from .teamtools.leases import LeaseManager

EXTENSION_KINDS = frozenset({
    "network.configure", "network.test", "browser.invoke", "local-vm.manage",
    "computer.control", "computer.retire",
})
Reply = dict[str, Any]
Handler = Callable[[dict[str, Any]], Awaitable[Any]]
GateCheck = Callable[[dict[str, Any], str], Awaitable[bool]]   # (command, epoch) → passes


def result_body(cid: str, reply: Reply, encoded: str | None) -> bytes:
    """The ``result`` route's body ``{"id", "result"|"error"}``; the reply's JSON text (as the
    ledger stores it) is spliced in rather than encoded again."""
    if encoded is not None and encoded.startswith("{") and len(encoded) > 2:
        return f'{{"id":{json.dumps(cid)},{encoded[1:]}'.encode()
    return json.dumps({"id": cid, **reply}, separators=(",", ":"), ensure_ascii=False).encode()


class PollLoop:
    """One runner process's protocol life."""

    def __init__(self, cfg: RunnerConfig, store: LedgerStore, instance_id: str,
                 stop: asyncio.Event | None = None) -> None:
        self.cfg = cfg
        self.store = store
        self.machine = MachineClient(cfg.server_url, cfg.runner_id, cfg.token, instance_id,
                                     features_header(cfg.browser_enabled))
        self.hermes = HermesClient(cfg.hermes_url, cfg.hermes_credentials)
        self.gateways = Gateways(self.hermes, cfg.allowed_profiles, self._post_event,
                                 self.request_reset)
        self.leases = LeaseManager(relay=self._relay, plugin=self.hermes, sessions=self.gateways)
        self.gateways.leases = self.leases
        self.kinds: dict[str, Handler] = {
            "http": self._http,
            "gateway.open": self.gateways.open,
            "gateway.rpc": self.gateways.rpc,
            "gateway.close": self.gateways.close,
            "lease.create": self._lease_create,
            "lease.bind": self.leases.bind,
            "lease.close": self.leases.close,
        }
        #: one check per admission gate; :data:`runner_ref.ledger.ADMISSION_GATES` orders them
        self.gate_checks: dict[Gate, GateCheck] = {
            Gate.DEADLINE: self._deadline_gate, Gate.ADMIT: self._admit_gate}
        self._inflight: dict[str, tuple[str, asyncio.Future[Reply]]] = {}
        self._handling: set[str] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._stop = stop if stop is not None else asyncio.Event()
        self._reset_requested = False
        self._poll_task: asyncio.Future[dict[str, Any]] | None = None
        self._poll_cut = False
        self._connected = False
        self._last_status: str | None = None
        self._retire = RetireCounter(timings.RETIRE_EVERY_COMMANDS)

    # -- lifecycle ---------------------------------------------------------------------------
    def stop(self) -> None:
        self._stop.set()
        self._cut_poll()

    def request_reset(self) -> None:
        """Something failed that needs a local disconnect and a reset poll."""
        self._reset_requested = True
        self._cut_poll()

    def _cut_poll(self) -> None:
        """End the hanging poll now (a stop, or a reset request)."""
        task = self._poll_task
        if task is not None and not task.done():
            self._poll_cut = True
            task.cancel()

    def _status(self, message: str) -> None:
        if message != self._last_status:
            self._last_status = message
            status.emit(message)

    async def run(self) -> int:
        """Poll until stopped (→ 0) or unauthorized (→ 1)."""
        watcher = asyncio.create_task(self._watch_stop())
        try:
            await self._retire_now()
            code = await self._poll_loop()
        finally:
            watcher.cancel()
        await self._shutdown()
        return code

    async def _watch_stop(self) -> None:
        await self._stop.wait()
        self._cut_poll()

    async def _retire_now(self) -> None:
        with contextlib.suppress(Exception):
            await self.store.retire(timings.now_ms(), int(timings.RETIRE_AFTER * 1000))

    async def _poll_loop(self) -> int:
        reset = True
        while not self._stop.is_set():
            if self._reset_requested:
                self._reset_requested = False
                if not reset:
                    reset = True
                    self._status(status.RECONNECTING)   # e.g. an event post failed
                    await self._disconnect_local()
            try:
                body = await self._until_stopped(self.machine.poll(reset))
            except Exception as exc:  # noqa: BLE001 - any poll failure reconnects
                if not isinstance(exc, ServerError):
                    exc = ServerError.of(codes.REQUEST_FAILED, status=0, message="poll failed")
                if exc.code == codes.UNAUTHORIZED.code:
                    status.emit(f"runner_unauthorized: {exc.message}")
                    return 1
                self._status(exc.message if exc.status else status.RECONNECTING)
                reset = True
                await self._disconnect_local()
                await self.reconnect_wait(timings.RECONNECT_DELAY)
                continue
            if body is None:  # stopped, or a reset was requested
                continue
            await self._take_answer(body, reset)
            reset = False
        return 0

    async def _take_answer(self, body: dict[str, Any], reset: bool) -> None:
        """A poll's answer: a new epoch first disconnects locally; holding the epoch, the runner
        is connected (after a new one on a normal poll too), "connected" printed after a reset
        poll; then each command runs in its own task."""
        epoch = body["epoch"]
        if self.machine.epoch is not None and epoch != self.machine.epoch:
            await self._disconnect_local()
        self.machine.epoch = epoch
        self._connected = True
        if reset:
            self._status(status.CONNECTED)
        for cmd in body.get("commands", []):
            self._spawn(cmd, epoch)

    async def reconnect_wait(self, delay: float) -> None:
        """The pause after a failed poll: ``delay`` seconds, cut short by a stop."""
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._stop.wait(), delay)

    async def _until_stopped(self, coro: Awaitable[dict[str, Any]]) -> dict[str, Any] | None:
        """The poll's answer; None if a stop or a reset request cut it short (they cancel the
        poll task through :meth:`_cut_poll`; no helper tasks per poll)."""
        task = asyncio.ensure_future(coro)
        self._poll_task, self._poll_cut = task, False
        if self._stop.is_set() or self._reset_requested:
            self._cut_poll()
        try:
            return await task
        except asyncio.CancelledError:
            if not self._poll_cut:
                raise   # the poll loop itself is being cancelled
            return None
        finally:
            self._poll_task, self._poll_cut = None, False

    async def _disconnect_local(self) -> None:
        self._connected = False
        with contextlib.suppress(Exception):
            await self.leases.dispose_all()
        await self.gateways.close_all()

    async def _shutdown(self) -> None:
        await self._disconnect_local()
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=timings.SHUTDOWN_DRAIN)
        for t in list(self._tasks):
            t.cancel()
        await self.machine.close()
        await self.hermes.close()

    # -- commands ----------------------------------------------------------------------------
    def _spawn(self, cmd: Any, epoch: str) -> None:
        if not isinstance(cmd, dict) or not isinstance(cmd.get("id"), str):
            return
        cid = cmd["id"]
        if cid in self._handling:
            # already being delivered: a copy is dropped (the original posts the reply), but
            # another payload is answered idempotency_conflict now (§4.3: before the in-flight
            # rule, while the original keeps running)
            if self._conflicts_in_flight(cmd):
                task = asyncio.create_task(self._post_conflict(cid, epoch))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
            return
        self._handling.add(cid)
        task = asyncio.create_task(self._deliver(cmd, epoch))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _conflicts_in_flight(self, cmd: dict[str, Any]) -> bool:
        flight = self._inflight.get(cmd["id"])
        if flight is None:
            return False
        try:
            fp = command_fingerprint(cmd)
        except (TypeError, ValueError, RecursionError):
            return False
        return decide(None, flight[0], fp) is DeliveryDecision.CONFLICT

    async def _post_conflict(self, cid: str, epoch: str) -> None:
        with contextlib.suppress(ServerError):
            await self.machine.post_encoded("result", result_body(cid, CONFLICT, None),
                                            epoch=epoch)

    async def _deliver(self, cmd: dict[str, Any], epoch: str) -> None:
        cid = cmd["id"]
        try:
            reply, encoded = await self._handle(cmd, epoch)
            with contextlib.suppress(ServerError):
                await self.machine.post_encoded("result", result_body(cid, reply, encoded),
                                                epoch=epoch)
        finally:
            self._handling.discard(cid)

    async def handle(self, cmd: dict[str, Any], epoch: str) -> Reply:
        """The ledger's answer to one delivery (§4)."""
        return (await self._handle(cmd, epoch))[0]

    async def _handle(self, cmd: dict[str, Any], epoch: str) -> tuple[Reply, str | None]:
        """The reply, and its JSON text when the ledger already holds it (so it is encoded
        once)."""
        cid = cmd["id"]
        try:
            fp = command_fingerprint(cmd)
        except (TypeError, ValueError, RecursionError):
            return error_result(codes.RUNNER_ERROR, "command cannot be fingerprinted"), None
        flight = self._inflight.get(cid)
        if flight is not None:
            if decide(None, flight[0], fp) is DeliveryDecision.CONFLICT:
                return CONFLICT, None
            return await asyncio.shield(flight[1]), None
        fut: asyncio.Future[Reply] = asyncio.get_running_loop().create_future()
        self._inflight[cid] = (fp, fut)
        try:
            reply, encoded = await self._decide_and_run(cmd, cid, fp, epoch)
        except BaseException:
            if not fut.done():
                fut.set_result(UNCERTAIN)
            raise
        finally:
            self._inflight.pop(cid, None)
        fut.set_result(reply)
        return reply, encoded

    async def _decide_and_run(self, cmd: dict[str, Any], cid: str, fp: str,
                              epoch: str) -> tuple[Reply, str | None]:
        try:
            # the row, or None once a fresh durable `started` row was inserted (claim = the
            # "no row → start" rule done atomically; see ledger_store)
            row = await self.store.claim(cid, fp, timings.now_ms())
        except Exception:  # noqa: BLE001 - a ledger that cannot be used never runs anything
            return UNCERTAIN, None
        decision = decide(row, None, fp)
        if decision is DeliveryDecision.CONFLICT:
            return CONFLICT, None
        if decision is DeliveryDecision.UNCERTAIN:
            return UNCERTAIN, None
        if decision is DeliveryDecision.REPLAY:
            assert row is not None and row.result is not None
            try:
                stored: Reply = json.loads(row.result)
            except ValueError:
                return UNCERTAIN, None
            return stored, row.result
        if self._retire.tick():
            await self._retire_now()
        reply = await self._admit_and_execute(cmd, epoch)
        encoded = json.dumps(reply, separators=(",", ":"))
        with contextlib.suppress(Exception):
            await self.store.complete(cid, encoded)
        return reply, encoded

    async def _admit_and_execute(self, cmd: dict[str, Any], epoch: str) -> Reply:
        for gate in ADMISSION_GATES:
            if not await self.gate_checks[gate](cmd, epoch):
                return NOT_ADMITTED
        return await self.execute(cmd.get("kind"), cmd.get("payload"), epoch)

    async def _deadline_gate(self, cmd: dict[str, Any], epoch: str) -> bool:
        return deadline_ok(cmd.get("expiresAt"), timings.now_ms())

    async def _admit_gate(self, cmd: dict[str, Any], epoch: str) -> bool:
        try:
            answer = await self.machine.post("admit", {"id": cmd["id"]}, epoch=epoch)
        except ServerError:
            return False
        return isinstance(answer, dict) and answer.get("allowed") is True

    async def execute(self, kind: Any, payload: Any, epoch: str) -> Reply:
        """Run one admitted command; every failure becomes a coded error reply."""
        try:
            handler = self.kinds.get(kind) if isinstance(kind, str) else None
            if handler is None:
                if kind in EXTENSION_KINDS:
                    raise CommandError.of(codes.FEATURE_UNAVAILABLE)
                raise CommandError.of(codes.COMMAND_UNKNOWN)
            if not self._connected or self.machine.epoch != epoch:
                raise CommandError.of(codes.RUNNER_ERROR, "runner is disconnected")
            if not isinstance(payload, dict):
                raise CommandError.of(codes.RUNNER_ERROR, "payload must be an object")
            return {"result": await handler(payload)}
        except CommandError as exc:
            return exc.to_result()
        except ServerError as exc:
            return error_result(exc.code, exc.message)
        except asyncio.CancelledError:
            raise
        except Exception:  # noqa: BLE001 - a non-coded failure is runner_error
            return error_result(codes.RUNNER_ERROR)

    # -- kind glue -------------------------------------------------------------------------
    async def _http(self, payload: dict[str, Any]) -> Any:
        return await run_http(payload, self.hermes, self.cfg.allowed_profiles,
                              self.cfg.artifact_roots)

    async def _lease_create(self, payload: dict[str, Any]) -> Any:
        require_profile(payload.get("profile"), self.cfg.allowed_profiles)
        return await self.leases.create(payload)

    async def _post_event(self, body: dict[str, Any]) -> Any:
        return await self.machine.post("event", body)

    async def _relay(self, lease_id: str, tool_id: str, arguments: dict[str, Any],
                     call_id: str) -> Any:
        long = tool_id.startswith(("managed_browser_", "credential_"))
        answer = await self.machine.post(
            "tool", {"leaseId": lease_id, "toolId": tool_id, "arguments": arguments,
                     "callId": call_id},
            timeout=timings.TOOL_RELAY_LONG_TIMEOUT if long else None)
        return answer.get("result") if isinstance(answer, dict) else None
