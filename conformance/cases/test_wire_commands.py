"""WIR — wire basics, the commands: one result per command, a held command delays no other,
expired and deadline-less commands are not run, a batch is answered in full, error results are
capped, the outbound profile filter (rows: conformance/rows/wire.py).

Each case drives the runner through the world only and judges it from the control plane's
history/lifecycle log and the scripted Hermes' effect log.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

from conformance.marks import case
from conformance.verdict import expect
from conformance.witness import witness
from fixtures.hermes.script import Script

from ._helpers_canned import WAIT, CannedTap, behind_canned
from ._helpers_channels import expect_error, new_session
from ._helpers_state import download, reads, until
from ._helpers_wire import (
    TIMEOUT,
    describe,
    http,
    http_payload,
    open_session,
    refused_with,
    result_posts,
    runner_exchanges,
)

#: One command of each sort a runner answers without any set-up: relays, a kind the protocol
#: does not have, and closes of ids it never opened. Each gets one result, error or not.
ONE_OF_EACH: tuple[tuple[str, dict], ...] = (
    ("http", http_payload("/api/status", profile=None)),
    ("http", http_payload("/api/status", profile=None)),
    ("hermes.bogus", {"x": 1}),
    ("gateway.close", {"connectionId": "0b9e6f0c-52a4-4a36-9d6c-4f5e1f0a7c21"}),
    ("lease.close", {"leaseId": "5d0c1f3e-8f0a-4b8e-a3a1-0e6a3c9b2f14"}),
)


@case("WIR-008", manual_clock=True)
async def test_every_delivered_command_gets_one_result(world):
    """Commands of several kinds (http, an unknown kind, closes of unknown ids) each get exactly
    one result post under their id, whatever it says.

    fails when: a delivered command gets no result post (e.g. an unknown kind dropped silently),
    two result posts (e.g. posted again on the next poll), or a result under another id."""
    handles = [await world.cp.submit(world.runner_id, kind, payload, as_sent=kind == "hermes.bogus")
               for kind, payload in ONE_OF_EACH]
    outs = []
    for h in handles:
        try:
            outs.append(await h.wait(TIMEOUT))
        except TimeoutError:
            outs.append(None)
    # A later command's result proves the runner went round its loop after the others.
    _, last = await http(world, "/api/status", profile=None)
    counts = {f"{h.kind} {h.id}": len(result_posts(world, h.id)) for h in handles}
    expect(all(n == 1 for n in counts.values()),
           expected="exactly one result post per delivered command id", actual=counts,
           witness=witness(world, *[h.id for h in handles
                                    if counts[f"{h.kind} {h.id}"] != 1], last=8))
    relays = [o for (kind, _), o in zip(ONE_OF_EACH, outs, strict=True) if kind == "http"]
    expect(all(o is not None and o.ok for o in relays) and last.ok,
           expected="every http command answered", actual=[describe(o) for o in outs])


@case("WIR-009", hermes_script="plain")
async def test_a_held_command_does_not_delay_another(world):
    """fails when: commands run one at a time: a prompt.submit held inside Hermes blocks a later
    http command until it is released."""
    ch, sid = await open_session(world)
    pause = world.hermes.pause_at("before prompt.accept", session_id=sid)
    held = await world.cp.submit_rpc(ch, "prompt.submit", {"session_id": sid, "text": "held"})
    await pause.reached(timeout=TIMEOUT)
    try:
        second = await world.cp.submit(world.runner_id, "http",
                                       http_payload("/api/status", profile=None))
        try:
            out = await world.runner.guard(second.wait(TIMEOUT + 1), "the second command's result",
                                           TIMEOUT)
        except TimeoutError:
            expect(False, expected=f"the second command answered within {TIMEOUT:.0f} s (scaled) "
                                   "while the first is held in Hermes (a status relay takes "
                                   "milliseconds)", actual=_unanswered(world, second.id, "the "
                                   "first still held in Hermes, the runner running"),
                   witness=witness(world, second.id, last=6))
            raise
        expect(out.ok and not held.done(),
               expected="the second command is answered while the first is held in Hermes",
               actual=f"second: {describe(out)}; first done: {held.done()}",
               witness=witness(world, second.id, last=6))
    finally:
        pause.release()
    first = await held.wait(TIMEOUT)
    expect(first.ok, expected="the held prompt.submit completes once released",
           actual=describe(first))


def _unanswered(world: Any, cid: str, context: str) -> str:
    """What the history shows of a command that got no result: its deliveries, admits, results."""
    polls = [f"#{ex.seq}" for ex in runner_exchanges(world, "poll")
             if any(c.get("id") == cid for c in ex.commands)]
    admits = [f"#{ex.seq}" for ex in runner_exchanges(world, "admit") if ex.command_id == cid]
    results = [f"#{ex.seq}" for ex in runner_exchanges(world, "result") if ex.command_id == cid]
    return (f"{cid} delivered by poll {', '.join(polls) or '(not yet)'}; admit "
            f"{', '.join(admits) or 'none'}; result {', '.join(results) or 'none'}; {context}")


@case("WIR-010")
async def test_expired_command_is_not_admitted_nor_executed(world):
    """fails when: the runner executes a command whose expiresAt passed before delivery, asks
    admit for it (expiresAt MUST be checked before admit, 4.3: a runner that never checks it
    still answers runner_command_not_admitted, because the control plane's admit refuses an
    expired command), or answers it with another code than runner_command_not_admitted."""
    target = world.artifact_root / "wir010.txt"
    target.write_text("expired\n")
    seen = world.hermes.effects.entries[-1].seq if world.hermes.effects.entries else 0
    handle = await world.cp.submit(world.runner_id, "http",
                                   http_payload("/api/files/download", file=str(target)),
                                   expires_at_ms=world.cp.clock.now_ms() - 60_000)
    out = await handle.wait(TIMEOUT)
    reads = [e for e in world.hermes.effects.of("file.read") if e.seq > seen]
    expect(not reads, expected="no Hermes effect for an expired command",
           actual=[e.seq for e in reads], witness=witness(world, handle.id, last=6))
    asked = [ex for ex in runner_exchanges(world, "admit") if ex.command_id == handle.id]
    expect(not asked, expected="no admit asked for a command expired at delivery (expiresAt "
                               "checked before admit)",
           actual=[f"#{ex.seq} admit -> {ex.response_body}" for ex in asked],
           witness=witness(world, handle.id, last=6))
    expect(refused_with(out, ["runner_command_not_admitted"]),
           expected="error result runner_command_not_admitted", actual=describe(out),
           witness=witness(world, handle.id, last=6))


@case("WIR-011", manual_clock=True)
async def test_a_batch_is_answered_in_full(world):
    """fails when: the runner handles only the first command of a poll answer (or drops the rest
    of a batch)."""
    clock = world.clock
    hold = world.cp.timings.poll_hold
    await world.cp.poll_held(world.runner_id, timeout=TIMEOUT)
    world.cp.faults.delay_next("poll", seconds=0.5)
    seen = world.cp.history.last_seq
    clock.advance(hold)  # the held poll ends empty; the next poll is delayed on the clock
    next_poll = await world.cp.history.wait_for(
        lambda ex: ex.route == "poll" and ex.runner_id == world.runner_id, timeout=TIMEOUT,
        after_seq=seen)
    await clock.wait_pending(clock.now() + 0.5, timeout=TIMEOUT)
    handles = [await world.cp.submit(world.runner_id, "http",
                                     http_payload("/api/status", profile=None))
               for _ in range(5)]
    clock.advance(0.5)
    answered = await world.cp.history.wait_for(
        lambda ex: ex.seq == next_poll.seq and ex.answered, timeout=TIMEOUT)
    delivered = {c.get("id") for c in answered.commands}
    expect(delivered == {h.id for h in handles}, expected="all five commands in one poll answer",
           actual=f"poll #{answered.seq} delivered {len(delivered)}")

    async def outcome(h: Any) -> Any:
        with contextlib.suppress(TimeoutError):
            return await world.runner.guard(h.wait(TIMEOUT + 1), f"the result of {h.id}", TIMEOUT)
        return None   # judged below, from the history: delivered, yet no result

    outs = await asyncio.gather(*(outcome(h) for h in handles))
    missing = [_unanswered(world, h.id, "the runner running") for h, o in zip(handles, outs,
                                                                               strict=True) if o is None]
    expect(not missing, expected=f"every command of the batch (poll #{answered.seq}) answered "
                                 f"within {TIMEOUT:.0f} s (scaled; five status relays take "
                                 "milliseconds)", actual=missing,
           witness=witness(world, after_seq=seen, last=12))
    expect(all(o.ok for o in outs), expected="every command of the batch answered",
           actual=[describe(o) for o in outs], witness=witness(world, after_seq=seen, last=12))


@case("WIR-013", hermes_script=Script.bundled("plain", broadcast_events=True),
      profiles=("default", "research"), config_extra={"allowedProfiles": ["default"]})
async def test_outbound_profile_filter_and_owned_events(world):
    """Hermes sends every session's events to every open socket (``broadcast_events``), so the
    second channel's socket carries the first channel's session frames.

    fails when: the runner lists or opens a profile outside allowedProfiles (session.create
    "research" executes), or forwards an event of a session another channel owns, or a frame
    without session_id (gateway.ready)."""
    # Outbound only: the runner reached the control plane by polling it.
    expect(runner_exchanges(world, "poll"), expected="the runner polls (outbound transport)",
           actual="no poll")
    ch1, sid1 = await open_session(world)
    ch2 = await world.cp.open_channel(world.runner_id, profile="default")
    before = world.hermes.effects.count("session.created")
    refused = await world.cp.rpc(ch2, "session.create", {"profile": "research", "cols": 100})
    expect(refused_with(refused, ["runner_profile_forbidden"])
           and world.hermes.effects.count("session.created") == before,
           expected="session.create for 'research' refused runner_profile_forbidden, no session",
           actual=describe(refused))
    out = await world.cp.rpc(ch1, "prompt.submit", {"session_id": sid1, "text": "hi"})
    expect(out.ok, expected="prompt.submit relayed", actual=describe(out))
    await ch1.next_event(type="message.complete", timeout=TIMEOUT)
    # ch2 owns no session: nothing may be forwarded on it; ch1 only carries sid1's frames.
    stray = list(ch2.events) + [e for e in ch1.events if e.get("session_id") != sid1]
    unowned = [e for e in ch1.events + ch2.events if not e.get("session_id")]
    expect(not stray and not unowned,
           expected="only owned-session frames are forwarded, none without session_id",
           actual=f"on the other channel: {[e.get('type') for e in stray][:5]}; without "
                  f"session_id: {[e.get('type') for e in unowned][:5]}",
           witness=witness(world, ch2.connection_id, last=6))


@case("WIR-905", start_runner=False)
async def test_command_without_a_numeric_deadline_is_not_run(world: Any) -> None:
    """A download is queued on the control plane (so its admit would be granted); the tap
    answers the runner's next poll itself with that command, once without expiresAt and once
    with expiresAt "soon" (two ids). Neither may reach Hermes.

    fails when: the runner executes a command whose deadline it cannot read (treats a missing
    or non-numeric expiresAt as "no deadline")."""
    from aiohttp import web

    async with CannedTap(world.cp.url, token=world.registered.token,
                         secrets=world.secrets) as tap:
        await behind_canned(world, tap)
        payloads = [download(world, "no-deadline.txt"), download(world, "text-deadline.txt")]
        tap.canned["poll"] = lambda request: web.Response(status=503)   # park the next poll
        await world.runner.guard(until(lambda: tap.answered, "the parked poll", WAIT),
                                 "the parked poll", WAIT + 1)
        handles = [await world.cp.submit(world.runner_id, "http", p) for p in payloads]
        wires = [dict(h.wire) for h in handles]
        wires[0].pop("expiresAt")
        wires[1]["expiresAt"] = "soon"
        body = json.dumps({"epoch": None, "commands": wires}).encode()

        def answer(request: Any) -> Any:
            epoch = world.cp.epoch(world.runner_id)
            return web.Response(status=200, content_type="application/json",
                                body=body.replace(b'"epoch": null', json.dumps(
                                    {"epoch": epoch})[1:-1].encode()))
        ids = {h.id for h in handles}

        async def park(request: Any) -> Any:   # the real delivery waits for the runner's answers
            def answered() -> bool:
                return ids <= {ex.command_id for ex in world.cp.history.entries
                               if ex.route == "result" and ex.answered}
            with contextlib.suppress(TimeoutError):
                await until(answered, "results for the canned commands", WAIT)
            return await tap.forward(request)
        tap.canned["poll"] = answer
        tap.then["poll"] = [park]
        await world.runner.guard(until(lambda: len(tap.answered) >= 2, "the canned commands",
                                       WAIT + 5), "the canned commands", WAIT + 6)
        for h in handles:
            await h.wait(WAIT + 20)
    ran = [p["search"] for p in payloads if reads(world, p)]
    expect(not ran, expected="no Hermes read for a command without a numeric expiresAt",
           actual=ran, witness=witness(world, *(h.id for h in handles)))


CAP = 1000   # §2.6.3: an error result's message, at most


def _error_posts(world: Any, after_seq: int) -> list[Any]:
    return [ex for ex in world.cp.history
            if ex.route == "result" and ex.seq > after_seq and isinstance(ex.request_body, dict)
            and isinstance(ex.request_body.get("error"), dict)]


@case("WIR-906", hermes_script=Script.bundled("slow", long_rpc_errors=True))
async def test_long_hermes_error_is_capped(world: Any) -> None:
    """Hermes answers session.steer without text with a JSON-RPC error whose message has 5000
    chars; the runner's error result (its posted ``error.message``) holds at most 1000.

    fails when: the runner forwards Hermes' error text uncapped (or caps only what it logs)."""
    cp = world.cp
    ch = await cp.open_channel(world.runner_id)
    sid = await new_session(world, ch)
    mark = max((ex.seq for ex in cp.history), default=0)
    out = await cp.rpc(ch, "session.steer", {"session_id": sid})
    expect_error(world, out, what="session.steer that Hermes answers with a 5000-char error",
                 needles=[sid])
    posts = _error_posts(world, mark)
    sizes = [len(str(ex.request_body["error"].get("message", ""))) for ex in posts]
    expect(bool(sizes) and max(sizes) <= CAP,
           expected=f"error results with a message of at most {CAP} chars",
           actual=f"messages of {sizes} chars" if sizes else "no error result posted")
