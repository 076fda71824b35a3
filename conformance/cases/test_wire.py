"""WIR — wire basics: headers, epochs, admit before effect, one result per command, concurrency.

Each case drives the runner through the world only and judges it from the control plane's
history/lifecycle log and the scripted Hermes' effect log (one shared sequence). Request headers
the history does not record (``Authorization``, ``x-runner-protocol``, ``Origin``) are judged by
the control plane's gates, which refuse a request without them (403 ``runner_unauthorized``,
409 ``runner_protocol_mismatch``).
"""

from __future__ import annotations

import asyncio

from conformance.checks import check
from conformance.checks.render import render_all
from conformance.checks.translate import translate
from conformance.marks import case
from conformance.verdict import expect
from fake_server.gates import ACCEPTED_FEATURES
from fixtures.hermes.script import Script

from ._helpers_wire import (
    LOWER_UUID,
    TIMEOUT,
    describe,
    event_posted,
    excerpt,
    http,
    http_payload,
    open_session,
    refused_with,
    result_posts,
    runner_exchanges,
    start_behind_tap,
)

GATE_REFUSALS = {"runner_unauthorized", "runner_protocol_mismatch"}


async def _tapped_traffic(world):
    """The runner behind a header tap does :func:`_traffic`, then stops; the tap, closed."""
    tap = await start_behind_tap(world)
    try:
        await _traffic(world)
        await world.runner.stop()
    finally:
        await tap.__aexit__()
    return tap


async def _traffic(world):
    """One http command and one channel with a session and a prompt: every core route the
    runner uses in normal work (poll, admit, result, event)."""
    _, out = await http(world, "/api/status", profile=None)
    expect(out.ok, expected="GET /api/status relayed", actual=describe(out),
           witness=excerpt(world, limit=6))
    ch, sid = await open_session(world)
    out = await world.cp.rpc(ch, "prompt.submit", {"session_id": sid, "text": "hello"})
    expect(out.ok, expected="prompt.submit relayed", actual=describe(out))
    await ch.next_event(type="message.complete", timeout=TIMEOUT)
    return ch, sid


@case("WIR-001", fresh=True)  # its first poll is the case: a fresh process
async def test_first_poll_carries_reset(world):
    """fails when: the runner's first poll of a process lacks ``x-runner-reset: 1`` (also after a
    restart)."""
    first = runner_exchanges(world, "poll")[0]
    expect(first.reset, expected="the first poll carries x-runner-reset: 1",
           actual=f"first poll #{first.seq} reset={first.reset}", witness=excerpt(world, limit=3))
    old_instance = first.instance
    await world.restart_runner()
    polls = [ex for ex in runner_exchanges(world, "poll") if ex.instance != old_instance]
    expect(polls and polls[0].reset,
           expected="the first poll after a restart carries x-runner-reset: 1",
           actual=f"first poll of the new process: {polls[0].seq if polls else None} "
                  f"reset={polls[0].reset if polls else None}", witness=excerpt(world, limit=4))


@case("WIR-002", hermes_script="plain", start_runner=False)
async def test_every_request_is_authenticated_and_versioned(world):
    """fails when: a request lacks ``Authorization: Bearer <token>`` or ``x-runner-protocol: 1``,
    or its ``x-runner-instance`` is not a lower-case UUID (e.g. upper-cased)."""
    tap = await _tapped_traffic(world)
    routes = {tap.route_of(path) for path, _ in tap.requests}
    expect({"poll", "admit", "result", "event"} <= routes,
           expected="traffic on poll, admit, result and event", actual=sorted(routes))
    bad = [f"{tap.route_of(path)}: authorization={h.get('authorization')!r} "
           f"protocol={h.get('x-runner-protocol')!r} instance={h.get('x-runner-instance')!r}"
           for path, h in tap.requests
           if h.get("authorization") != "Bearer <token>" or h.get("x-runner-protocol") != "1"
           or not LOWER_UUID.match(h.get("x-runner-instance", ""))]
    expect(not bad, expected="every request: Authorization: Bearer <token>, x-runner-protocol: 1, "
                             "a lower-case UUID x-runner-instance", actual=bad[:5])
    refused = [ex for ex in runner_exchanges(world) if ex.code in GATE_REFUSALS]
    expect(not refused, expected="no request refused by gates 1-2",
           actual=[f"#{ex.seq} {ex.route} {ex.status} {ex.code}" for ex in refused[:5]],
           witness=excerpt(world, limit=5))


@case("WIR-003", hermes_script="plain", start_runner=False)
async def test_no_request_carries_origin(world):
    """fails when: any request (e.g. only result or event posts) carries an ``Origin`` header
    (gate 1 then answers 403 runner_unauthorized although the token is right)."""
    tap = await _tapped_traffic(world)
    with_origin = [f"{tap.route_of(path)}: Origin {h['origin']!r}" for path, h in tap.requests
                   if "origin" in h]
    expect(not with_origin, expected="no request carries an Origin header",
           actual=with_origin[:5])
    refused = [ex for ex in runner_exchanges(world) if ex.code == "runner_unauthorized"]
    expect(not refused, expected="no request refused by gate 1 (Origin absent, token right)",
           actual=[f"#{ex.seq} {ex.route} 403 runner_unauthorized" for ex in refused[:5]],
           witness=excerpt(world, limit=6))


@case("WIR-004", hermes_script="plain")
async def test_non_poll_requests_carry_the_delivery_epoch(world):
    """Traffic in one epoch, then a new epoch (the control plane's watchdog ends the old one and
    the runner polls with a reset), then traffic again: every admit/result/event carries the
    epoch of the poll answer that delivered its command (or its channel's gateway.open).

    fails when: a non-poll request lacks ``x-runner-epoch`` or carries another epoch than the
    poll answer that delivered its command, e.g. headers built once at connect and kept after
    the epoch changed (stale-epoch-header)."""
    ch, _ = await _traffic(world)
    old = world.cp.epoch(world.runner_id)
    await world.cp.force_watchdog(world.runner_id)
    await world.runner.guard(world.cp.wait_epoch_change(world.runner_id, old, timeout=TIMEOUT),
                             "a new epoch", TIMEOUT)
    later = await world.cp.submit(world.runner_id, "http", http_payload("/api/status",
                                                                        profile=None))
    try:
        out = await later.wait(TIMEOUT)
        ch2, sid2 = await open_session(world)
        prompted = await world.cp.rpc(ch2, "prompt.submit", {"session_id": sid2, "text": "again"})
        done = f"http {describe(out)}, prompt.submit {describe(prompted)}"
        ok = out.ok and prompted.ok
    except (TimeoutError, AssertionError) as exc:  # judged by the headers first, below
        done, ok = f"the work did not complete ({type(exc).__name__})", False
    wrong = _epoch_mismatches(world)
    epochs = {str(p.response_body.get("epoch")) for p in runner_exchanges(world, "poll")
              if isinstance(p.response_body, dict) and p.commands}
    expect(not wrong, expected="every non-poll request carries the epoch of the poll answer "
                               "that delivered what it concerns", actual=wrong[:5],
           witness=excerpt(world, later.id, limit=8))
    expect(len(epochs) >= 2 and ok, expected="commands delivered and answered in two epochs",
           actual=f"{len(epochs)} epoch(s) delivered commands; after the change: {done}",
           witness=excerpt(world, later.id, limit=6))


def _epoch_mismatches(world) -> list[str]:
    """Requests whose x-runner-epoch is not the epoch of the poll answer that delivered what they
    concern, and delivered commands whose admit never got past the epoch gate (a request the
    gate refuses is recorded without its body, so a stale admit shows as a missing one)."""
    delivered_in: dict[str, str] = {}  # command id / connection id -> epoch of its delivery
    commands: dict[str, str] = {}
    for poll in runner_exchanges(world, "poll"):
        body = poll.response_body if isinstance(poll.response_body, dict) else {}
        for cmd in poll.commands:
            delivered_in.setdefault(str(cmd.get("id")), str(body.get("epoch")))
            commands.setdefault(str(cmd.get("id")), str(body.get("epoch")))
            conn = (cmd.get("payload") or {}).get("connectionId")
            if cmd.get("kind") == "gateway.open" and conn:
                delivered_in.setdefault(str(conn), str(body.get("epoch")))
    wrong = []
    for ex in runner_exchanges(world):
        if ex.route == "poll" or ex.status == 404:
            continue
        key = ex.command_id if ex.route in ("admit", "result") else ex.connection_id
        want = delivered_in.get(key or "")
        if ex.request_epoch is None or (want is not None and ex.request_epoch != want):
            wrong.append(f"#{ex.seq} {ex.route} x-runner-epoch={ex.request_epoch!r}, "
                         f"delivered under {want!r}")
    admitted = {ex.command_id for ex in runner_exchanges(world, "admit") if ex.command_id}
    refused = [f"#{ex.seq} {ex.route} x-runner-epoch={ex.request_epoch!r} -> {ex.code}"
               for ex in runner_exchanges(world) if ex.code == "runner_epoch_changed"]
    for cid, epoch in commands.items():
        if cid not in admitted:
            wrong.append(f"command {cid} delivered under {epoch!r}: no admit of it passed the "
                         f"epoch gate (refused: {refused[:3]})")
    return wrong


@case("WIR-005")
async def test_instance_id_is_stable_and_new_after_restart(world):
    """fails when: the instance id changes between requests of one process (e.g. a new id per
    request or per reconnect), or a restarted process reuses the old id (persisted in state)."""
    await http(world, "/api/status", profile=None)
    first = {ex.instance for ex in runner_exchanges(world)}
    expect(len(first) == 1, expected="one x-runner-instance for every request of the process",
           actual=sorted(map(str, first)), witness=excerpt(world, limit=6))
    seen = world.cp.history.last_seq
    await world.restart_runner()
    await http(world, "/api/status", profile=None)
    later = {ex.instance for ex in runner_exchanges(world) if ex.seq > seen}
    expect(len(later) == 1 and not (later & first),
           expected="the restarted process uses one new instance id",
           actual=f"before {sorted(map(str, first))}, after {sorted(map(str, later))}",
           witness=excerpt(world, after_seq=seen, limit=4))


@case("WIR-006", hermes_script="plain")
async def test_no_effect_before_the_admit_is_granted(world):
    """fails when: the runner causes the Hermes effect of a command (socket, session, prompt,
    file read) before the control plane answered its admit with allowed:true, or skips admit."""
    (world.artifact_root / "wir006.txt").write_text("wir-006\n")
    await _traffic(world)
    _, out = await http(world, "/api/files/download",
                        file=str(world.artifact_root / "wir006.txt"))
    expect(out.ok, expected="the download is relayed", actual=describe(out))
    facts = translate(history=world.cp.history.entries, lifecycle=world.cp.lifecycle.entries,
                      effects=world.hermes.effects.entries)
    report = check(facts)
    inv2 = [v for v in report.violations if v.invariant_id == "INV-2"]
    expect(not inv2, expected="admit.seq_out < effect.seq for every effect of every command",
           actual=render_all(inv2), witness=excerpt(world, limit=10))
    # And directly: the first Hermes socket opens after the gateway.open admit was answered true.
    opened = world.hermes.effects.of("ws.connected")
    admits = [ex for ex in runner_exchanges(world, "admit")
              if isinstance(ex.response_body, dict) and ex.response_body.get("allowed") is True]
    first_admit = min((ex.seq_out or 0) for ex in admits) if admits else None
    expect(opened and first_admit is not None and first_admit < opened[0].seq,
           expected="the first ws.connected effect follows a granted admit",
           actual=f"first granted admit answered at {first_admit}, first ws.connected at "
                  f"{opened[0].seq if opened else None}", witness=excerpt(world, limit=8))


@case("WIR-007", hermes_script="plain", manual_clock=True)
async def test_refused_admit_gives_no_effect(world):
    """fails when: the runner executes a command whose admit answered ``{allowed:false}`` (here a
    prompt.submit whose channel was revoked while the admit was on the wire), or answers it with
    another code than runner_command_not_admitted."""
    ch, sid = await open_session(world)
    await event_posted(world, ch, sid, timeout=TIMEOUT)   # no event of the create may reach the revoked channel
    handle = await world.cp.submit_rpc(ch, "prompt.submit", {"session_id": sid, "text": "no"})
    world.cp.faults.delay_next("admit", seconds=0.25, target=handle.id)
    admit = await world.cp.history.wait_for(
        lambda ex: ex.route == "admit" and ex.command_id == handle.id, timeout=TIMEOUT)
    when = world.clock.now() + 0.25
    await world.clock.wait_pending(when, timeout=TIMEOUT)
    world.cp.revoke_channel(ch)
    world.clock.advance(0.25)
    out = await handle.wait(TIMEOUT)
    answered = await world.cp.history.wait_for(
        lambda ex: ex.seq == admit.seq and ex.answered, timeout=TIMEOUT)
    expect(answered.response_body == {"allowed": False}, expected="the admit answered allowed:false",
           actual=answered.response_body)
    prompts = world.hermes.effects.of("prompt.accepted", session_id=sid)
    expect(not prompts, expected="no prompt.accepted effect after a refused admit",
           actual=[e.seq for e in prompts], witness=excerpt(world, handle.id, sid, limit=8))
    expect(refused_with(out, ["runner_command_not_admitted"]),
           expected="error result runner_command_not_admitted", actual=describe(out),
           witness=excerpt(world, handle.id, limit=6))


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
    handles = [await world.cp.submit(world.runner_id, kind, payload)
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
           witness=excerpt(world, *[h.id for h in handles
                                    if counts[f"{h.kind} {h.id}"] != 1], limit=8))
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
        second, out = await http(world, "/api/status", profile=None)
        expect(out.ok and not held.done(),
               expected="the second command is answered while the first is held in Hermes",
               actual=f"second: {describe(out)}; first done: {held.done()}",
               witness=excerpt(world, second.id, limit=6))
    finally:
        pause.release()
    first = await held.wait(TIMEOUT)
    expect(first.ok, expected="the held prompt.submit completes once released",
           actual=describe(first))


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
           actual=[e.seq for e in reads], witness=excerpt(world, handle.id, limit=6))
    asked = [ex for ex in runner_exchanges(world, "admit") if ex.command_id == handle.id]
    expect(not asked, expected="no admit asked for a command expired at delivery (expiresAt "
                               "checked before admit)",
           actual=[f"#{ex.seq} admit -> {ex.response_body}" for ex in asked],
           witness=excerpt(world, handle.id, limit=6))
    expect(refused_with(out, ["runner_command_not_admitted"]),
           expected="error result runner_command_not_admitted", actual=describe(out),
           witness=excerpt(world, handle.id, limit=6))


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
    outs = await asyncio.gather(*(h.wait(TIMEOUT) for h in handles))
    answered = await world.cp.history.wait_for(
        lambda ex: ex.seq == next_poll.seq and ex.answered, timeout=TIMEOUT)
    delivered = {c.get("id") for c in answered.commands}
    expect(delivered == {h.id for h in handles}, expected="all five commands in one poll answer",
           actual=f"poll #{answered.seq} delivered {len(delivered)}")
    expect(all(o.ok for o in outs), expected="every command of the batch answered",
           actual=[describe(o) for o in outs], witness=excerpt(world, after_seq=seen, limit=12))


@case("WIR-012", hermes_script="plain", start_runner=False)
async def test_only_protocol_feature_names_are_advertised(world):
    """fails when: ``x-runner-features`` names a feature the protocol does not define (e.g.
    ``team-tools``, ``bogus-v1``), or separates names with ``", "``."""
    tap = await _tapped_traffic(world)
    known = set(ACCEPTED_FEATURES)
    bad = sorted({f"{tap.route_of(path)}: {h['x-runner-features']!r}" for path, h in tap.requests
                  if "x-runner-features" in h and h["x-runner-features"]
                  and not set(h["x-runner-features"].split(",")) <= known})
    expect(not bad, expected="x-runner-features lists only protocol feature names, joined by a "
                             "bare ','", actual=bad[:5])


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
           witness=excerpt(world, ch2.connection_id, limit=6))
