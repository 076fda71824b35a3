"""Spec-coverage cases for a ledger the runner cannot use and for the local disconnect.

A ledger that cannot be used is made from outside: where the state directory holds the
upstream-recommended SQLite ledger ``runner-commands.sqlite3`` (§4), the harness holds its write
lock (``BEGIN EXCLUSIVE`` on its own connection), so the runner's claim of a new command (its
lookup and its ``started`` row) fails. The file name, schema and encoding are an implementation
choice (§4), so a runner that keeps its ledger elsewhere cannot be judged this way: the cases are
not-applicable to it (never failed; the positive control ``other-ledger-file`` pins this). A
runner that waits for the lock instead of failing is not judged on what it does after the lock
is released. A local disconnect is made with one failed poll.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator
from typing import Any

import pytest

from conformance.marks import case
from conformance.verdict import expect

from ._helpers_channels import (
    WAIT,
    effects_of,
    expect_error,
    expect_no_effect,
    new_session,
    prompt,
    socket_of,
    witness,
    ws_closed,
)
from ._helpers_process import state_dir
from ._helpers_state import download, reads
from ._helpers_wire import describe, http, posted_code

LEDGER = "runner-commands.sqlite3"
LOCKED_WAIT = 15.0


@contextlib.contextmanager
def _ledger_locked(world: Any) -> Iterator[None]:
    path = state_dir(world.runner) / LEDGER
    if not path.is_file():   # never create it: connect() would make an empty file
        pytest.skip(f"not-applicable: the state directory holds no {LEDGER} (the ledger's "
                    "file name is an implementation choice, §4), so it cannot be locked")
    conn = sqlite3.connect(str(path), timeout=5.0, isolation_level=None)
    try:
        conn.execute("BEGIN EXCLUSIVE")
        yield
    finally:
        with contextlib.suppress(sqlite3.Error):
            conn.execute("ROLLBACK")
        conn.close()


async def _result_while_locked(world: Any) -> tuple[dict[str, Any], Any]:
    """A download submitted while the ledger is locked, and its result post (None when the
    runner posted none within the bound: it waits for the lock)."""
    _, out = await http(world, "/api/status", profile=None)   # the ledger exists and is in use
    expect(out.ok, expected="GET /api/status relayed", actual=describe(out))
    payload = download(world, "locked.txt")
    with _ledger_locked(world):
        handle = await world.cp.submit(world.runner_id, "http", payload)
        try:
            ex = await world.cp.history.wait_for(
                lambda e: e.route == "result" and e.command_id == handle.id and e.answered,
                timeout=LOCKED_WAIT)
        except TimeoutError:
            ex = None
    return payload, ex


@case("INC-901")
async def test_unclaimable_command_is_not_executed(world: Any) -> None:
    """The harness holds the ledger's write lock; a download delivered then must not reach
    Hermes (its result, if posted while the lock is held, is an error).

    fails when: the runner treats a ledger failure as "no row" and executes the command without
    a durable started row (a crash then replays it: double execution)."""
    payload, ex = await _result_while_locked(world)
    if ex is None:
        return   # it waits for the lock: the lookup did not fail, nothing to judge
    expect(posted_code(ex) is not None, expected="an error result while the ledger is locked",
           actual=str(ex.request_body)[:200])
    expect(reads(world, payload) == 0, expected="no Hermes read of an unclaimed command",
           actual=f"{reads(world, payload)} file.read effect(s)")


@case("INC-902")
async def test_unclaimable_command_is_uncertain(world: Any) -> None:
    """The harness holds the ledger's write lock; the download delivered then is answered
    runner_command_uncertain ("original command needs reconciliation").

    fails when: the runner answers another code (runner_error), or waits for the lock until
    the control plane's deadline."""
    _, ex = await _result_while_locked(world)
    code = posted_code(ex) if ex is not None else None
    expect(code == "runner_command_uncertain",
           expected="runner_command_uncertain while the ledger is locked",
           actual=code or ("no result within 15 s" if ex is None else "a result"))


async def _fail_one_poll(world: Any) -> Any:
    """One poll answered 500 (a local disconnect); the reset poll that follows."""
    cp = world.cp
    mark = cp.history.last_seq
    cp.faults.fail_next("poll", n=1, status=500, code="internal_error")
    return await world.runner.guard(cp.history.wait_for(
        lambda ex: ex.route == "poll" and ex.reset and ex.status == 200 and ex.answered,
        timeout=WAIT + 6, after_seq=mark), "a reset poll after the failed poll", WAIT + 5)


@case("GEN-901")
async def test_local_disconnect_interrupts_running_sessions(world: Any) -> None:
    """A turn runs (HANGTEST); one poll fails; the local disconnect closes the channel and
    sends session.interrupt to its running session first.

    fails when: a local disconnect closes the Hermes sockets without interrupting the turns
    they carry (the agent keeps working for nobody)."""
    ch = await world.cp.open_channel(world.runner_id)
    sid = await new_session(world, ch)
    sock = await socket_of(world, sid)
    await prompt(world, ch, sid, "HANGTEST")
    await world.hermes.effects.wait_for("prompt.accepted", timeout=WAIT, session_id=sid)
    await _fail_one_poll(world)
    closed = await ws_closed(world, sock)
    interrupts = effects_of(world, "session.interrupted", session_id=sid)
    expect(interrupts and (closed is None or interrupts[0].seq < closed.seq),
           expected=f"session.interrupt for {sid} before its socket closes",
           actual=f"interrupts {[e.seq for e in interrupts]}, ws.closed "
                  f"{closed.seq if closed else None}", witness=witness(world, sid, "ws.closed"))


@case("GEN-902")
async def test_local_disconnect_tombstones_channel_ids(world: Any) -> None:
    """A channel is open; one poll fails; after the reset poll, a gateway.open of the closed
    channel's id fails and connects no Hermes socket.

    fails when: the local disconnect forgets the ids it closed, so a late (or replayed)
    gateway.open revives a channel of the old generation."""
    ch = await world.cp.open_channel(world.runner_id)
    sid = await new_session(world, ch)
    sock = await socket_of(world, sid)
    await _fail_one_poll(world)
    await ws_closed(world, sock)
    mark = world.hermes.effects.entries[-1].seq
    again = await world.cp.open_channel(world.runner_id, connection_id=ch.connection_id,
                                        check=False)
    expect_error(world, again.open_outcome, what="gateway.open of an id the local disconnect "
                 "closed", needles=[ch.connection_id])
    expect_no_effect(world, "ws.connected", after_seq=mark, what="a refused re-open",
                     needles=[ch.connection_id])

