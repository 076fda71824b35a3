"""Spec-coverage cases for the process and the poll loop (§1.4, §1.5, §2.2, §2.5).

The runner is a black box: these cases look at its state directory, its stderr, its exit and the
control plane's history. Stops are ordered with the manual clock: a held poll and a held admit
stay held until the case advances the clock, so "after the signal" is an observed fact (the held
poll was aborted), never a sleep.
"""

from __future__ import annotations

import re
import stat
import uuid
from signal import SIGINT, SIGTERM
from typing import Any

from conformance.marks import case
from conformance.verdict import expect
from fake_server import Timings

from ._helpers_process import brief, exit_code, state_dir
from ._helpers_state import download, reads
from ._helpers_wire import HeaderTap, describe, excerpt, http, open_session

WAIT = 10.0
#: next poll after an answer: "within a few seconds" (§2.5); generous for a loaded machine
NEXT_POLL = 10.0
ISO_LINE = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})? \S")


@case("CFG-903")
async def test_state_files_are_0600(world: Any) -> None:
    """After a command ran (so the ledger and its journal exist), every regular file under the
    state directory has no group or other permission bits.

    fails when: the runner creates the ledger (or the lock, the instance file, a journal) with
    the process umask, e.g. 0644."""
    _, out = await http(world, "/api/status", profile=None)
    expect(out.ok, expected="GET /api/status relayed", actual=describe(out))
    where = state_dir(world.runner)
    files = sorted(p for p in where.rglob("*") if p.is_file())
    expect(files, expected="files in the state directory", actual="none")
    loose = [f"{p.relative_to(where)} {oct(stat.S_IMODE(p.stat().st_mode))}" for p in files
             if stat.S_IMODE(p.stat().st_mode) & 0o077]
    expect(not loose, expected="every state file mode 0600 (no group/other bits)", actual=loose)


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
    late = [brief(ex) for ex in cp.history.since(mark) if ex.route == "poll"]
    expect(not late, expected="no poll after SIGINT", actual=late,
           witness=excerpt(world, after_seq=mark))
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
           witness=excerpt(world, handle.id))
    expect(code == 0, expected="exit code 0", actual=code)


@case("CFG-906")
async def test_status_lines_are_time_stamped(world: Any) -> None:
    """After a connection and a graceful stop, every non-empty stderr line starts with an
    ISO-8601 time and a space.

    fails when: the runner prints bare texts ("connected", "stopped"), another time format, or
    multi-line output (a traceback) on stderr."""
    code = await world.runner.terminate(15)
    _, err = world.runner.redacted_output()
    lines = [ln for ln in err.splitlines() if ln.strip()]
    bad = [ln[:160] for ln in lines if not ISO_LINE.match(ln)]
    expect(lines and not bad, expected="every stderr line '<ISO-8601 time> <text>'",
           actual=bad[:5] or "no stderr at all")
    expect(code == 0, expected="exit code 0", actual=code)


@case("WIR-901", timings=Timings(poll_hold=0.5, redelivery=1.0))
async def test_connected_polls_carry_no_reset(world: Any) -> None:
    """Once a poll was answered 200, the next polls (no failure in between) must not carry
    x-runner-reset.

    fails when: the runner sends x-runner-reset: 1 on every poll (a reset flag never cleared),
    which makes the control plane drop its online state each time."""
    cp = world.cp
    first = await cp.history.wait_for(lambda ex: ex.route == "poll" and ex.status == 200
                                      and ex.answered, timeout=WAIT)
    after = first.seq
    polls = []
    for _ in range(3):
        ex = await world.runner.guard(cp.history.wait_for(
            lambda e, a=after: e.route == "poll" and e.seq > a, timeout=NEXT_POLL + 1,
            after_seq=after),
            "the next poll", NEXT_POLL)
        polls.append(ex)
        after = ex.seq
    reset = [brief(ex) for ex in polls if ex.reset]
    expect(not reset, expected="no x-runner-reset on the polls of a connected runner",
           actual=reset, witness=excerpt(world, after_seq=first.seq - 1))


@case("WIR-902", hermes_script="plain", start_runner=False)
async def test_features_on_every_request(world: Any) -> None:
    """Behind a header tap: when the runner advertises features at all, every request it makes
    (poll, admit, result, event) carries the same non-empty x-runner-features value.

    fails when: the runner sends the header on its first poll only (the control plane then loses
    the features at the next reconnect) or on polls only."""
    async with HeaderTap(world.cp.url, token=world.registered.token, secrets=world.secrets) as tap:
        world.runner.config["serverURL"] = tap.url
        world.runner.write_config()
        await world.start_runner()
        _, out = await http(world, "/api/status", profile=None)
        expect(out.ok, expected="GET /api/status relayed", actual=describe(out))
        ch, sid = await open_session(world)
        out = await world.cp.rpc(ch, "prompt.submit", {"session_id": sid, "text": "hello"})
        await ch.next_event(type="message.complete", timeout=WAIT)
        await world.runner.stop()
    values = [(tap.route_of(path), h.get("x-runner-features", "")) for path, h in tap.requests]
    if not any(v for _, v in values):
        return  # nothing advertised: absent and empty mean the same (§2.2)
    missing = sorted({route for route, v in values if not v})
    expect(not missing, expected="x-runner-features on every request",
           actual=f"missing on {missing}")


@case("REC-901", timings=Timings(poll_hold=0.5, redelivery=1.0))
async def test_next_poll_follows_the_answer(world: Any) -> None:
    """With a short poll hold, four idle poll answers in a row are each followed by the next
    poll within a few seconds (bounded wait, no timing assertion).

    fails when: the runner backs off while idle (waits tens of seconds after an empty answer)
    or polls only when it has work, so the control plane's 35 s watchdog takes it offline."""
    cp = world.cp
    answered = await cp.history.wait_for(lambda ex: ex.route == "poll" and ex.status == 200
                                         and ex.answered, timeout=WAIT)
    for _ in range(4):
        prev = answered
        try:
            nxt = await cp.history.wait_for(lambda e, p=prev: e.route == "poll" and e.seq > p.seq,
                                            timeout=NEXT_POLL, after_seq=prev.seq)
        except TimeoutError:
            nxt = None
        expect(nxt is not None, expected=f"a poll within {NEXT_POLL:.0f} s of the answer to "
                                         f"poll #{prev.seq}", actual="none",
               witness=excerpt(world, after_seq=prev.seq - 1))
        assert nxt is not None
        answered = await cp.history.wait_for(
            lambda e, s=nxt.seq: e.route == "poll" and e.seq == s and e.answered,
            timeout=WAIT, after_seq=prev.seq)
