"""Helpers of the channel cases (cancel, isolation, limits): sessions, witnesses, a holding proxy.

Rules of this module:
- Everything drives the runner through the world only (control plane, scripted Hermes, and a
  loopback TCP proxy in front of Hermes); the runner under test is a black box.
- Waiting is always bounded (``wait_for`` with a timeout); nothing sleeps to wait for a condition.
- Witnesses are :func:`conformance.witness.witness` lines of the world's redacted transcript,
  cut to the items that name the case's channel, session or command, so a failure quotes the
  exchanges that show it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections.abc import Iterable
from typing import Any

from conformance.verdict import CaseFailed
from conformance.witness import witness

WAIT = 10.0


# -- evidence ---------------------------------------------------------------------------------

def outcome_text(out: Any) -> str:
    if out is None:
        return "no outcome"
    if out.ok:
        return f"ok {json.dumps(out.result, default=str)[:200]}"
    return f"{out.status} {out.code}: {str(out.message)[:200]}"


def effects_of(world: Any, kind: str, *, after_seq: int = 0, **match: Any) -> list[Any]:
    return [e for e in world.hermes.effects.of(kind, **match) if (e.seq or 0) > after_seq]


def expect_error(world: Any, out: Any, *, codes: Iterable[str] | None = None, what: str,
                 needles: Iterable[str | None] = ()) -> None:
    """Fail unless ``out`` is an error outcome (with one of ``codes`` when given)."""
    allowed = tuple(codes or ())
    if out is not None and not out.ok and (not allowed or out.code in allowed):
        return
    want = f"{what}: an error result" + (f" with code {' or '.join(allowed)}" if allowed else "")
    raise CaseFailed(want, outcome_text(out), witness(world, *needles))


def expect_ok(world: Any, out: Any, *, what: str, needles: Iterable[str | None] = ()) -> None:
    if out is not None and out.ok:
        return
    raise CaseFailed(f"{what}: a result", outcome_text(out), witness(world, *needles))


def expect_no_effect(world: Any, kind: str, *, after_seq: int = 0, what: str,
                     needles: Iterable[str | None] = (), **match: Any) -> None:
    found = effects_of(world, kind, after_seq=after_seq, **match)
    if found:
        raise CaseFailed(f"{what}: no Hermes effect {kind}",
                         f"{len(found)} {kind} effect(s), first seq {found[0].seq}",
                         witness(world, *needles, kind))


async def stays_online(world: Any, epoch: str | None, *, what: str) -> None:
    """The runner is still online in ``epoch`` and answers a fresh ``GET /api/status``."""
    out = await world.cp.command(world.runner_id, "http", {
        "path": "/api/status", "method": "GET", "search": ""})
    now = world.cp.epoch(world.runner_id)
    if not out.ok or now != epoch:
        raise CaseFailed(f"{what}: the runner stays online in epoch {epoch} and relays "
                         "GET /api/status", f"epoch {now}, status command {outcome_text(out)}",
                         witness(world, "disconnected", "reset"))


# -- channels and sessions --------------------------------------------------------------------

async def new_session(world: Any, ch: Any, profile: str = "default") -> str:
    """session.create through ``ch``; the live session id."""
    out = await world.cp.rpc(ch, "session.create", {"profile": profile, "cols": 100})
    expect_ok(world, out, what="session.create through the channel", needles=[ch.connection_id])
    sid = out.result.get("session_id") if isinstance(out.result, dict) else None
    if not isinstance(sid, str):
        raise CaseFailed("session.create result with a session_id", outcome_text(out))
    return sid


async def stored_id(world: Any, ch: Any, sid: str) -> str | None:
    """The stored session id of ``sid``, from its forwarded session.info (None if none came)."""
    for frame in list(ch.events):
        if frame.get("type") == "session.info" and frame.get("session_id") == sid:
            return (frame.get("payload") or {}).get("stored_session_id")
    live = world.hermes.live_sessions.get(sid)
    return getattr(live, "stored_id", None) or getattr(live, "stored_session_id", None)


async def prompt(world: Any, ch: Any, sid: str, text: str) -> Any:
    out = await world.cp.rpc(ch, "prompt.submit", {"session_id": sid, "text": text})
    expect_ok(world, out, what=f"prompt.submit {text!r}", needles=[sid])
    return out


async def event_for(ch: Any, type_: str, sid: str, timeout: float = WAIT) -> dict[str, Any]:
    """The first forwarded frame of ``type_`` for session ``sid`` (bounded wait)."""
    after = 0
    while True:
        frame = await ch.next_event(type_, timeout=timeout, after=after)
        if frame.get("session_id") == sid:
            return frame
        after = ch.events.index(frame) + 1


async def close_while_held(world: Any, ch: Any, pause: Any) -> None:
    """Close ``ch`` (gateway.close answered ok) while a request is held at ``pause``; the pause
    is released afterwards, also when the close fails."""
    try:
        await pause.reached(timeout=WAIT)
        closed = await world.cp.close_channel(ch)
        expect_ok(world, closed, what="gateway.close", needles=[ch.connection_id])
    finally:
        pause.release()


async def socket_of(world: Any, sid: str) -> str | None:
    e = await world.hermes.effects.wait_for("session.created", timeout=WAIT, session_id=sid)
    return e.socket_id


async def ws_closed(world: Any, socket_id: str | None, timeout: float = WAIT) -> Any | None:
    """The ``ws.closed`` effect of ``socket_id`` (None if it did not come in ``timeout``)."""
    with contextlib.suppress(TimeoutError, asyncio.TimeoutError):
        return await world.hermes.effects.wait_for("ws.closed", timeout=timeout,
                                                   socket_id=socket_id)
    return None


def open_sockets(world: Any) -> list[str]:
    """Hermes sockets connected and not closed (from the effect log)."""
    opened = [e.socket_id for e in world.hermes.effects.of("ws.connected")]
    closed = {e.socket_id for e in world.hermes.effects.of("ws.closed")}
    return [s for s in opened if s not in closed]


async def one_batch(world: Any, *commands: Any) -> bool:
    """True when every command was delivered by one poll answer (bounded wait for delivery)."""
    for cmd in commands:
        await cmd.wait_delivered(WAIT)
    seqs = set()
    for cmd in commands:
        facts = world.cp.lifecycle.filter("delivered", command_id=cmd.id)
        seqs.add(facts[0].detail.get("exchange_seq") if facts else None)
    return len(seqs) == 1


# -- a loopback proxy in front of Hermes that can hold or refuse connections ------------------

class HermesProxy:
    """TCP proxy to Hermes. ``hold(pattern)`` holds every new connection whose first request line
    matches ``pattern`` (e.g. the WebSocket upgrade ``GET /api/ws``) until ``release()``;
    ``refuse = True`` closes every new connection at once (Hermes unreachable)."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.refuse = False
        self._pattern: re.Pattern[bytes] | None = None
        self._gate = asyncio.Event()
        self._gate.set()
        self.held: asyncio.Queue[bytes] = asyncio.Queue()
        self._server: asyncio.AbstractServer | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> HermesProxy:
        self._server = await asyncio.start_server(self._client, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    def hold(self, pattern: str) -> None:
        self._pattern = re.compile(pattern.encode())
        self._gate.clear()

    def cut(self) -> None:
        """Hermes unreachable: close every proxied connection and refuse new ones."""
        self.refuse = True
        for t in list(self._tasks):
            t.cancel()

    def release(self) -> None:
        self._pattern = None
        self._gate.set()

    async def stop(self) -> None:
        self.release()
        if self._server is not None:
            self._server.close()
        for t in list(self._tasks):
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        try:
            if self.refuse:
                return
            up_r, up_w = await asyncio.open_connection("127.0.0.1", self.upstream_port)
            await asyncio.gather(self._upstream(reader, up_w), self._pipe(up_r, writer))
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            with contextlib.suppress(Exception):
                writer.close()
            if task is not None:
                self._tasks.discard(task)

    async def _upstream(self, src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
        """Client → Hermes; a chunk that starts a held request waits for ``release()`` (the
        check is per chunk, so a request on a kept-alive connection is held too)."""
        try:
            while data := await src.read(65536):
                pattern = self._pattern
                if pattern is not None and any(pattern.search(line)
                                               for line in data.split(b"\r\n")):
                    self.held.put_nowait(data.split(b"\r\n", 1)[0])
                    await self._gate.wait()
                dst.write(data)
                await dst.drain()
        except OSError:
            pass
        finally:
            with contextlib.suppress(Exception):
                dst.close()

    @staticmethod
    async def _pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
        try:
            while data := await src.read(65536):
                dst.write(data)
                await dst.drain()
        except OSError:
            pass
        finally:
            with contextlib.suppress(Exception):
                dst.close()


async def start_behind_proxy(world: Any) -> HermesProxy:
    """For a world opened with ``start_runner=False``: put a proxy in front of Hermes, point the
    runner's ``hermesURL`` at it and start the runner (awaited online)."""
    proxy = await HermesProxy(world.hermes.port).start()
    world._open.insert(0, _Stoppable(proxy))  # stopped with the world, after the runner
    assert world.runner is not None
    world.runner.config["hermesURL"] = proxy.url
    await world.start_runner()
    return proxy


class _Stoppable:
    def __init__(self, proxy: HermesProxy) -> None:
        self.proxy = proxy

    async def stop(self) -> None:
        await self.proxy.stop()


def _elide(value: Any, min_len: int) -> Any:
    if isinstance(value, str) and len(value) >= min_len:
        return f"<{len(value)} chars elided from the transcript>"
    if isinstance(value, dict):
        return {k: _elide(v, min_len) for k, v in value.items()}
    if isinstance(value, list):
        return [_elide(v, min_len) for v in value]
    return value


def elide_large_bodies(world: Any, min_len: int = 1024 * 1024) -> None:
    """Replace strings of ``min_len`` chars or more in the recorded exchange bodies by a marker
    (the digests stay), so a case that sends a huge payload does not put it into the report."""
    for ex in world.cp.history.entries:
        ex.request_body = _elide(ex.request_body, min_len)
        ex.response_body = _elide(ex.response_body, min_len)
