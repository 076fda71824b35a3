"""Helpers of the state cases (dedupe, receipts, generations, reconnection).

Rules:
- Observation only through the world: the control plane's history and lifecycle log, the scripted
  Hermes' effect log, the runner adapter. Nothing here knows the runner under test.
- Every wait is bounded (``history.wait_for``, ``effects.wait_for``, ``lifecycle.wait_for``).
- ``kill_on_effect`` is the one instrument that is not a pause point: it SIGKILLs the runner's
  process group synchronously inside the scripted Hermes, the moment Hermes records an effect,
  before Hermes has answered the request (the scripted Hermes has no HTTP pause point).
- Verdicts of at-most-once, receipts-survive and started-never-rerun go through the history
  checker (``conformance.checks``) with the harness facts (kill, start) recorded on the world's
  shared sequence.
- Witness lines come from :mod:`conformance.witness`; the state cases quote the items naming
  their command (or route) plus every Hermes effect (``witness(world, cid, effects=True)``).
"""

from __future__ import annotations

import asyncio
import base64
import os
import signal
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from ..checks import check
from ..checks.facts import Fact, fact
from ..checks.translate import translate
from ..verdict import CaseFailed
from ..witness import lines_of, witness

WAIT = 10.0
UNCERTAIN = "runner_command_uncertain"
NOT_ADMITTED = "runner_command_not_admitted"
CONFLICT = "idempotency_conflict"


# -- commands ------------------------------------------------------------------------------------
def download(world: Any, name: str = "receipt.txt", content: bytes = b"receipt-bytes\n") -> dict[str, Any]:
    """An ``http`` payload downloading a fresh file inside the artifact root: its Hermes effect
    is one ``file.read`` of that path."""
    path = world.artifact_root / name
    path.write_bytes(content)
    real = str(Path(path).resolve())
    return {"method": "GET", "path": "/api/files/download",
            "search": "?" + urlencode({"profile": "default", "path": real})}


def download_path(payload: dict[str, Any]) -> str:
    from urllib.parse import parse_qs
    return parse_qs(payload["search"].lstrip("?"))["path"][0]


def reads(world: Any, payload: dict[str, Any]) -> int:
    """How many times Hermes served the file of a ``download`` payload."""
    path = download_path(payload)
    return len(world.hermes.effects.of("file.read", where=lambda e: e.detail.get("resolved") == path
                                       or e.detail.get("path") == path))


def body_bytes(result: Any) -> bytes | None:
    if isinstance(result, dict) and isinstance(result.get("body"), str):
        return base64.b64decode(result["body"])
    return None


# -- history views -------------------------------------------------------------------------------
def results_of(world: Any, cid: str) -> list[Any]:
    return [ex for ex in world.cp.history.entries if ex.route == "result" and ex.command_id == cid]


def admits_of(world: Any, cid: str) -> list[Any]:
    return [ex for ex in world.cp.history.entries if ex.route == "admit" and ex.command_id == cid]


def reply_of(ex: Any) -> dict[str, Any]:
    """``{"result": …}`` or ``{"error": …}`` of a result exchange."""
    body = ex.request_body if isinstance(ex.request_body, dict) else {}
    if body.get("error") is not None:
        return {"error": body["error"]}
    return {"result": body.get("result")}


def error_code(ex: Any) -> str | None:
    err = reply_of(ex).get("error")
    if err is None:
        return None
    return str(err.get("code") or "runner_error") if isinstance(err, dict) else "runner_error"


async def wait_result(world: Any, cid: str, *, after_seq: int = 0, timeout: float = WAIT) -> Any:
    """The next result exchange (body read) of command ``cid`` after ``after_seq``."""
    return await world.runner.guard(
        world.cp.history.wait_for(lambda ex: ex.route == "result" and ex.command_id == cid
                                  and ex.request_body is not None, timeout=timeout + 1,
                                  after_seq=after_seq),
        f"a result for {cid}", timeout)


async def wait_route(world: Any, route: str, pred: Callable[[Any], bool] = lambda ex: True, *,
                     after_seq: int = 0, answered: bool = False, timeout: float = WAIT) -> Any:
    return await world.runner.guard(
        world.cp.history.wait_for(lambda ex: ex.route == route and pred(ex)
                                  and (not answered or ex.answered), timeout=timeout + 1,
                                  after_seq=after_seq),
        f"a {route} request", timeout)


def polls_after(world: Any, seq: int) -> list[Any]:
    return [ex for ex in world.cp.history.entries if ex.route == "poll" and ex.seq > seq]


def instance_now(world: Any) -> str | None:
    """The instance id of the runner's latest request."""
    for ex in reversed(world.cp.history.entries):
        if ex.instance:
            return str(ex.instance)
    return None


# -- the history checker -------------------------------------------------------------------------
class Harness:
    """The harness steps of one case as checker facts, each on the world's shared sequence."""

    def __init__(self, world: Any) -> None:
        self.world = world
        self.facts: list[Fact] = []

    def add(self, kind: str, **kw: Any) -> Fact:
        f = fact(self.world.sequence(), kind, **kw)
        self.facts.append(f)
        return f

    def kill(self, point: str, *, command_id: str | None = None) -> Fact:
        return self.add("kill", reason=point, command_id=command_id, instance=instance_now(self.world))

    def start(self) -> Fact:
        return self.add("start")

    def started(self) -> None:
        """Name the instance of the latest ``start`` once the new process has spoken."""
        for i in range(len(self.facts) - 1, -1, -1):
            f = self.facts[i]
            if f.kind == "start" and f.instance is None:
                self.facts[i] = Fact(f.seq, f.source, f.kind, instance=instance_now(self.world))
                return


def verdict(world: Any, harness: Harness | None = None,
            invariants: Sequence[str] = ("INV-1", "INV-6", "INV-7")) -> None:
    """Fail the case on the first violation of ``invariants`` the history checker proves."""
    facts = translate(history=world.cp.history.entries, lifecycle=list(world.cp.lifecycle),
                      effects=world.hermes.effects.entries,
                      harness=harness.facts if harness else ())
    report = check(facts)
    for v in report.violations:
        if v.invariant_id in invariants:
            raise CaseFailed(f"{v.invariant_id}: {v.sentence}", v.note or "violated",
                             lines_of(world, v.witness))


# -- instruments ---------------------------------------------------------------------------------
def kill_on_effect(world: Any, kind: str, pred: Callable[[Any], bool] = lambda e: True) -> list[Any]:
    """Arm: the first effect ``kind`` matching ``pred`` SIGKILLs the runner's process group inside
    Hermes, before Hermes answers. Returns a list that gets the effect once fired."""
    log = world.hermes.effects
    original = log.record
    fired: list[Any] = []

    def record(k: str, **kw: Any) -> Any:
        eff = original(k, **kw)
        if not fired and k == kind and pred(eff):
            fired.append(eff)
            proc = world.runner.process
            if proc is not None and proc.running:
                os.killpg(proc.pid, signal.SIGKILL)
        return eff

    log.record = record
    return fired


__all__ = ["CONFLICT", "NOT_ADMITTED", "UNCERTAIN", "Harness", "admits_of", "body_bytes",
           "download", "error_code", "instance_now", "kill_on_effect", "polls_after", "reads",
           "lease_session", "reply_of", "results_of", "verdict", "wait_result", "wait_route"]


# -- gateway -------------------------------------------------------------------------------------
async def open_session(world: Any, profile: str = "default") -> tuple[Any, str]:
    """A channel and a session it owns (``session.create`` through the runner)."""
    ch = await world.cp.open_channel(world.runner_id, profile=profile)
    out = await world.cp.rpc(ch, "session.create", {"profile": profile})
    if not out.ok or not isinstance(out.result, dict) or "session_id" not in out.result:
        raise CaseFailed("session.create through the runner answers a session_id",
                         f"{out.status} {out.code} {out.result}",
                         witness(world, ch.connection_id, effects=True))
    ch.stored_ids = {**getattr(ch, "stored_ids", {}), out.result["session_id"]: out.result.get("stored_session_id")}
    return ch, str(out.result["session_id"])


def lease_session(ch: Any, sid: str) -> dict[str, Any]:
    """A lease's ``session`` as upstream sends it: ``{runtimeId, storedId}`` (its stored id from
    the session.create result of :func:`open_session`)."""
    return {"runtimeId": sid, "storedId": getattr(ch, "stored_ids", {}).get(sid)}


def prompt_effects(world: Any, session_id: str | None = None) -> list[Any]:
    """Effects of a ``prompt.submit`` reaching Hermes (accepted or queued)."""
    return [e for e in world.hermes.effects.entries
            if e.kind in ("prompt.accepted", "prompt.queued")
            and (session_id is None or e.session_id == session_id)
            and not (e.kind == "prompt.accepted" and e.detail.get("queued") is True)]


def new_id() -> str:
    """A command id chosen before submitting, so a targeted fault can be armed first."""
    import uuid
    return str(uuid.uuid4())


async def redeliver(world: Any, handle: Any, *, payload: dict[str, Any] | None = None) -> Any:
    """The outcome of the command's next delivery to the new process: the control plane's own
    redelivery when the command is still queued, else (it ended ``runner_offline`` with the
    reset poll's disconnect) ``cp.replay`` of the same wire; a replay the control plane ends
    offline on its own (queued between two online states) is submitted again once the runner
    is online, never read as the runner's answer."""
    if payload is None and not handle.done():
        out = await _redelivered(world, handle)
        if not handle.ended_offline:
            return out
    for _ in range(3):  # a replay the control plane itself ended offline was never judged
        again = await world.cp.replay(world.runner_id, handle.wire, payload=payload)
        out = await _redelivered(world, again)
        record = await world.cp.store.get_runner(world.runner_id)
        if not again.ended_offline or record is None or not record.enabled:
            return out
        await world.runner.wait_online(world.cp, world.runner_id, WAIT)
    return out


async def _redelivered(world: Any, handle: Any, turn: float = 0.25) -> Any:
    """``handle``'s outcome. On a manual clock the control plane's redelivery (``redelivery`` s
    after a delivery that got no accepted result, e.g. a copy a runner skipped while the
    original was in flight, §2.8) comes only when the clock moves: move it a redelivery at a
    time while no outcome came, never into the watchdog (``offline_after`` since last seen)."""
    clock, t = world.cp.clock, world.cp.timings
    manual = getattr(world, "clock", None) is not None
    loop = asyncio.get_running_loop()
    end = loop.time() + WAIT
    while True:
        try:
            return await handle.wait(turn if manual else WAIT)
        except TimeoutError:
            if not manual or loop.time() > end:
                raise
        slot = world.cp.hub.slots.get(world.runner_id)
        room = (slot.online.seen + t.offline_after - t.watchdog_tick - clock.now()
                if slot is not None and slot.online is not None else 0.0)
        if handle.deliveries and room > t.redelivery + 0.1:
            clock.advance(t.redelivery + 0.1)


async def until(cond: Callable[[], Any], what: str, timeout: float = WAIT, step: float = 0.05) -> Any:
    """Poll ``cond`` (sync or async) with a bound; its first truthy value, else TimeoutError."""
    import asyncio
    import inspect
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while True:
        value = cond()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value
        if loop.time() > end:
            raise TimeoutError(f"{what}: not within {timeout}s")
        await asyncio.sleep(step)


def socket_of(world: Any, after_seq: int = 0) -> str | None:
    """The Hermes socket id of the latest ``ws.connected`` after ``after_seq``."""
    found = world.hermes.effects.of("ws.connected", after_seq=after_seq)
    return found[-1].socket_id if found else None


async def socket_closed(world: Any, socket_id: str | None, timeout: float = WAIT) -> Any:
    return await world.runner.guard(
        world.hermes.effects.wait_for("ws.closed", timeout=timeout + 1, socket_id=socket_id),
        f"Hermes socket {socket_id} closed", timeout)


def mark(world: Any) -> int:
    """A seq on the shared sequence: everything recorded later has a greater one."""
    return int(world.sequence())
