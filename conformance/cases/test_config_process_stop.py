"""CFG — config and process, the graceful stop: what SIGTERM must finish, interrupt, unbind and
close before the runner exits with code 0 and prints "stopped" (§1.5).

Each case brings the runner to a state (a running session, a result post in flight, a bound
lease, open channels), sends SIGTERM and reads the exit code, the scripted Hermes' effects and
the control plane's history.
"""

from __future__ import annotations

import contextlib
import uuid
from signal import SIGINT, SIGTERM
from typing import Any

from conformance.marks import case
from conformance.verdict import expect
from conformance.witness import lines_of, output_lines, witness

from ._helpers_process import (
    STATUS,
    bound_lease,
    exit_code,
)
from ._helpers_state import WAIT, download, reads


@case("CFG-010")
async def test_sigterm_interrupts_running_session_and_exits_0(world: Any) -> None:
    """fails when: SIGTERM exits without session.interrupt of a running turn, or with a
    non-zero code."""
    cp = world.cp
    ch = await cp.open_channel(world.runner_id, profile="default")
    created = await cp.rpc(ch, "session.create", {"profile": "default", "title": "long"})
    expect(created.ok, expected="session.create ok", actual=f"{created.status} {created.code}")
    sid = created.result["session_id"]
    sub = await cp.rpc(ch, "prompt.submit", {"session_id": sid, "text": "HANGTEST"})
    expect(sub.ok, expected="prompt.submit ok", actual=f"{sub.status} {sub.code}")
    await world.hermes.effects.wait_for("prompt.accepted", timeout=10, session_id=sid)
    code = await world.runner.terminate(15)
    interrupts = world.hermes.effects.of("session.interrupted", session_id=sid)
    expect(interrupts, expected=f"session.interrupt of running session {sid}",
           actual="none", witness=lines_of(world, world.hermes.effects.entries[-5:]))
    expect(code == 0, expected="exit code 0", actual=code,
           witness=output_lines(world.runner.stderr_text(), last=3))


#: How long CFG-011 lets a runner that abandons its post at SIGTERM take to exit.
ABANDON_WINDOW = 3.0


@case("CFG-011", manual_clock=True)
async def test_sigterm_lets_an_in_flight_result_post_finish(world: Any) -> None:
    """fails when: SIGTERM aborts the result post of a command that already ran (or exits before
    it is answered)."""
    cp, rid = world.cp, world.runner_id
    command_id = str(uuid.uuid4())
    # targeted: applied once the body is read; on the manual clock it holds until advanced
    cp.faults.delay_next("result", n=1, seconds=5.0, target=command_id)
    handle = await cp.submit(rid, "http", dict(STATUS), command_id=command_id)
    await cp.history.wait_for(lambda ex: ex.route == "result" and ex.command_id == handle.id,
                              timeout=10)
    await cp.poll_held(rid, timeout=10)
    world.runner.signal(SIGTERM)
    await world.runner.guard(cp.poll_released(rid, timeout=10), "its poll was aborted", 10)
    # A runner that abandons its in-flight post at SIGTERM closes that connection and exits on
    # its own, however loaded the machine: give it that chance before the post may be answered
    # (a bounded wait for its exit; a draining runner does not exit, it waits for the answer).
    with contextlib.suppress(TimeoutError):
        await world.runner.wait(ABANDON_WINDOW)
    world.clock.advance(5.0)
    code = await exit_code(world.runner, "SIGTERM with a result post in flight")
    results = [ex for ex in cp.history.filter(route="result") if ex.command_id == handle.id]
    expect(any(ex.status == 200 for ex in results),
           expected="the held result post is answered 200 before the exit",
           actual=lines_of(world, results))
    expect(handle.done() and handle.outcome is not None and handle.outcome.ok,
           expected="the command ends with its result", actual=handle.outcome)
    expect(code == 0, expected="exit code 0", actual=code)


@case("CFG-014")
async def test_graceful_stop_prints_stopped(world: Any) -> None:
    """fails when: the runner prints nothing (or something else) at a graceful stop, or writes
    its status lines to stdout."""
    code = await world.runner.terminate(15)
    out, err = world.runner.redacted_output()
    last = [ln for ln in err.splitlines() if ln.strip()][-1:] or [""]
    expect(code == 0, expected="exit code 0", actual=code)
    expect("stopped" in last[0], expected='a last stderr line "<time> stopped"',
           actual=last[0][-200:] or "no stderr")
    expect(out == "", expected="nothing on stdout", actual=out[:200])


@case("CFG-018")
async def test_sigterm_disposes_leases_with_unbind(world: Any) -> None:
    """fails when: a graceful stop leaves bound leases in the plugin (no unbind)."""
    b = await bound_lease(world)
    code = await world.runner.terminate(15)
    unbinds = world.hermes.effects.of("unbind", session_id=b.session["runtimeId"])
    expect(any(e.detail.get("generation") == b.binding["generation"] for e in unbinds),
           expected="an unbind of the bound lease (its generation) before the exit",
           actual=f"{len(unbinds)} unbind effect(s)")
    expect(code == 0, expected="exit code 0", actual=code)


@case("CFG-019")
async def test_sigterm_closes_every_gateway(world: Any) -> None:
    """fails when: a graceful stop exits with channels' WebSockets still open (left to the
    kernel: an abnormal 1006 close), or closes only some of them."""
    cp = world.cp
    for _ in range(2):
        await cp.open_channel(world.runner_id, profile="default")
    sockets = {e.socket_id for e in world.hermes.effects.of("ws.connected")}
    code = await world.runner.terminate(15)
    # a close frame, not the kernel's reset at exit (aiohttp reports that as 1006)
    closed = {e.socket_id for e in world.hermes.effects.of("ws.closed")
              if e.detail.get("code") not in (None, 1006)}
    expect(len(sockets) >= 2 and sockets <= closed,
           expected=f"every channel socket closed: {sorted(s or '' for s in sockets)}",
           actual=f"closed: {sorted(s or '' for s in closed)}")
    expect(code == 0, expected="exit code 0", actual=code)


@case("CFG-904", manual_clock=True)
async def test_sigint_stops_polling(world: Any) -> None:
    """The runner's poll is held (the manual clock never ends it); SIGINT is sent; from then on
    no poll request may reach the control plane, and the runner exits.

    fails when: the runner polls again after the signal (a "last poll" before leaving, a loop
    that re-polls once the aborted poll returns) or ignores SIGINT."""
    cp, rid = world.cp, world.runner_id
    await cp.poll_held(rid, timeout=WAIT)
    mark = cp.history.last_seq
    world.runner.signal(SIGINT)
    await world.runner.guard(cp.poll_released(rid, timeout=WAIT), "its held poll was aborted",
                             WAIT)
    code = await exit_code(world.runner, "SIGINT")
    late = lines_of(world, [ex for ex in cp.history.since(mark) if ex.route == "poll"])
    expect(not late, expected="no poll after SIGINT", actual=late,
           witness=witness(world, after_seq=mark))
    expect(code == 0, expected="exit code 0 after SIGINT", actual=code)


@case("CFG-905", manual_clock=True)
async def test_graceful_stop_starts_no_new_command(world: Any) -> None:
    """A download's admit is held by the control plane (manual clock); SIGTERM; once the runner
    aborted its poll the admit is answered {allowed:true}; the runner must not execute the
    command (no Hermes read of the file) — it had not started executing it.

    fails when: the runner drains pending commands before it stops accepting work, executing a
    command whose admit arrives during the stop."""
    cp, rid = world.cp, world.runner_id
    payload = download(world, "stop.txt")
    command_id = str(uuid.uuid4())
    cp.faults.delay_next("admit", n=1, seconds=5.0, target=command_id)
    handle = await cp.submit(rid, "http", payload, command_id=command_id)
    await world.runner.guard(cp.history.wait_for(
        lambda ex: ex.route == "admit" and ex.command_id == handle.id, timeout=WAIT + 1),
        "the held admit", WAIT)
    await cp.poll_held(rid, timeout=WAIT)
    world.runner.signal(SIGTERM)
    await world.runner.guard(cp.poll_released(rid, timeout=WAIT), "its held poll was aborted",
                             WAIT)
    world.clock.advance(5.0)
    code = await exit_code(world.runner, "SIGTERM with an admit pending")
    expect(reads(world, payload) == 0,
           expected="no Hermes read of a command admitted during the graceful stop",
           actual=f"{reads(world, payload)} file.read effect(s)",
           witness=witness(world, handle.id))
    expect(code == 0, expected="exit code 0", actual=code)
