"""WIR — wire basics, the requests: what every request carries (authentication, protocol, reset,
features, epochs, a stable instance id), no Origin, and the admit before any effect (rows:
conformance/rows/wire.py; the commands' results: test_wire_commands.py; the HTTP client:
test_wire_client.py).

Each case drives the runner through the world only and judges it from the control plane's
history/lifecycle log and the scripted Hermes' effect log (one shared sequence). Request headers
the history does not record (``Authorization``, ``x-runner-protocol``, ``Origin``) are judged by
the control plane's gates, which refuse a request without them (403 ``runner_unauthorized``,
409 ``runner_protocol_mismatch``).
"""

from __future__ import annotations

from typing import Any

from conformance.checks import check
from conformance.checks.render import render_all
from conformance.checks.translate import translate
from conformance.marks import case
from conformance.verdict import expect
from conformance.witness import lines_of, witness
from fake_server import Timings
from fake_server.gates import ACCEPTED_FEATURES

from ._helpers_wire import (
    LOWER_UUID,
    TIMEOUT,
    HeaderTap,
    describe,
    enter_tap,
    event_posted,
    http,
    http_payload,
    open_session,
    refused_with,
    runner_exchanges,
)

WAIT = 10.0
#: next poll after an answer: "within a few seconds" (§2.5); generous for a loaded machine
NEXT_POLL = 10.0
GATE_REFUSALS = {"runner_unauthorized", "runner_protocol_mismatch"}


async def _tapped_traffic(world):
    """The runner behind a header tap does :func:`_traffic`, then stops; the tap, closed."""
    tap, stalled = await _tapped_traffic_or_stall(world)
    if stalled is not None:
        raise stalled
    return tap


async def _tapped_traffic_or_stall(world):
    """:func:`_tapped_traffic`, but a wait that runs out (the runner never came online, a
    command got no answer) is returned beside the tap, not raised: the case judges the headers
    the tap recorded first (they may be why the control plane refused the runner)."""
    tap = await enter_tap(world)
    stalled = None
    try:
        try:
            await world.start_runner()
            await _traffic(world)
        except TimeoutError as exc:
            stalled = exc
        await world.runner.stop()
    finally:
        await tap.__aexit__()
    return tap, stalled


async def _traffic(world):
    """One http command and one channel with a session and a prompt: every core route the
    runner uses in normal work (poll, admit, result, event)."""
    _, out = await http(world, "/api/status", profile=None)
    expect(out.ok, expected="GET /api/status relayed", actual=describe(out),
           witness=witness(world, last=6))
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
           actual=f"first poll #{first.seq} reset={first.reset}", witness=witness(world, last=3))
    old_instance = first.instance
    await world.restart_runner()
    polls = [ex for ex in runner_exchanges(world, "poll") if ex.instance != old_instance]
    expect(polls and polls[0].reset,
           expected="the first poll after a restart carries x-runner-reset: 1",
           actual=f"first poll of the new process: {polls[0].seq if polls else None} "
                  f"reset={polls[0].reset if polls else None}", witness=witness(world, last=4))


@case("WIR-002", hermes_script="plain", start_runner=False)
async def test_every_request_is_authenticated_and_versioned(world):
    """fails when: a request lacks ``Authorization: Bearer <token>`` or ``x-runner-protocol: 1``,
    or its ``x-runner-instance`` is not a lower-case UUID (e.g. upper-cased). The headers are
    judged first, on whatever the tap recorded: a runner the control plane refuses for them
    never comes online, which is then the consequence, not the verdict."""
    tap, stalled = await _tapped_traffic_or_stall(world)
    bad = [f"{tap.route_of(path)}: authorization={h.get('authorization')!r} "
           f"protocol={h.get('x-runner-protocol')!r} instance={h.get('x-runner-instance')!r}"
           for path, h in tap.requests
           if h.get("authorization") != "Bearer <token>" or h.get("x-runner-protocol") != "1"
           or not LOWER_UUID.match(h.get("x-runner-instance", ""))]
    expect(not bad, expected="every request: Authorization: Bearer <token>, x-runner-protocol: 1, "
                             "a lower-case UUID x-runner-instance", actual=bad[:5],
           witness=witness(world, last=5))
    refused = [ex for ex in runner_exchanges(world) if ex.code in GATE_REFUSALS]
    expect(not refused, expected="no request refused by gates 1-2",
           actual=[f"#{ex.seq} {ex.route} {ex.status} {ex.code}" for ex in refused[:5]],
           witness=witness(world, last=5))
    if stalled is not None:
        raise stalled
    routes = {tap.route_of(path) for path, _ in tap.requests}
    expect({"poll", "admit", "result", "event"} <= routes,
           expected="traffic on poll, admit, result and event", actual=sorted(routes))


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
           witness=witness(world, last=6))


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
           witness=witness(world, later.id, last=8))
    expect(len(epochs) >= 2 and ok, expected="commands delivered and answered in two epochs",
           actual=f"{len(epochs)} epoch(s) delivered commands; after the change: {done}",
           witness=witness(world, later.id, last=6))


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
           actual=sorted(map(str, first)), witness=witness(world, last=6))
    seen = world.cp.history.last_seq
    await world.restart_runner()
    await http(world, "/api/status", profile=None)
    later = {ex.instance for ex in runner_exchanges(world) if ex.seq > seen}
    expect(len(later) == 1 and not (later & first),
           expected="the restarted process uses one new instance id",
           actual=f"before {sorted(map(str, first))}, after {sorted(map(str, later))}",
           witness=witness(world, after_seq=seen, last=4))


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
           actual=render_all(inv2), witness=witness(world, last=10))
    # And directly: the first Hermes socket opens after the gateway.open admit was answered true.
    opened = world.hermes.effects.of("ws.connected")
    admits = [ex for ex in runner_exchanges(world, "admit")
              if isinstance(ex.response_body, dict) and ex.response_body.get("allowed") is True]
    first_admit = min((ex.seq_out or 0) for ex in admits) if admits else None
    expect(opened and first_admit is not None and first_admit < opened[0].seq,
           expected="the first ws.connected effect follows a granted admit",
           actual=f"first granted admit answered at {first_admit}, first ws.connected at "
                  f"{opened[0].seq if opened else None}", witness=witness(world, last=8))


@case("WIR-007", hermes_script="plain", manual_clock=True)
async def test_refused_admit_gives_no_effect(world):
    """fails when: the runner executes a command whose admit answered ``{allowed:false}`` (here a
    prompt.submit whose channel was revoked while the admit was on the wire), or answers it with
    another code than runner_command_not_admitted."""
    ch, sid = await open_session(world)
    await event_posted(world, ch, sid, timeout=TIMEOUT)   # no event of the create may reach the revoked channel
    handle = await world.cp.submit_rpc(ch, "prompt.submit", {"session_id": sid, "text": "no"})
    world.cp.faults.delay_next("admit", seconds=0.25, target=handle.id)
    admit = await world.runner.guard(world.cp.history.wait_for(
        lambda ex: ex.route in ("admit", "result") and ex.command_id == handle.id,
        timeout=TIMEOUT + 1), "the prompt.submit's admit", TIMEOUT)
    expect(admit.route == "admit", expected="an admit asked for the prompt.submit before its result",
           actual=f"result #{admit.seq} posted without an admit",
           witness=witness(world, handle.id, sid, last=8))
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
           actual=[e.seq for e in prompts], witness=witness(world, handle.id, sid, last=8))
    expect(refused_with(out, ["runner_command_not_admitted"]),
           expected="error result runner_command_not_admitted", actual=describe(out),
           witness=witness(world, handle.id, last=6))


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
    reset = lines_of(world, [ex for ex in polls if ex.reset])
    expect(not reset, expected="no x-runner-reset on the polls of a connected runner",
           actual=reset, witness=witness(world, after_seq=first.seq - 1))


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
