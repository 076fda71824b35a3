"""LIM — limits and bad input: 64 channels / 64 leases, oversized Hermes bodies, unknown and
malformed commands, Hermes errors and outages (rows: conformance/rows/limits.py)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from conformance.marks import case
from conformance.verdict import CaseFailed, expect, not_applicable
from conformance.witness import witness
from fake_server import Timings

from ._helpers_canned import CannedTap, behind_canned, reset_poll_after_canned
from ._helpers_channels import (
    elide_large_bodies,
    event_for,
    expect_error,
    expect_no_effect,
    expect_ok,
    new_session,
    outcome_text,
    start_behind_proxy,
    stays_online,
    stored_id,
)
from ._helpers_outcomes import brief_outcome, effects_since, last_seq, submit_http

MAX_CHANNELS = MAX_LEASES = 64
MIB = 1024 * 1024


def _last_seq(world: Any) -> int:
    entries = world.hermes.effects.entries
    return entries[-1].seq if entries else 0


@case("LIM-001")
async def test_65th_channel_is_refused(world: Any) -> None:
    """64 channels are opened at once; the 65th gateway.open is refused with a plain error and
    opens no Hermes socket.

    fails when: the runner has no channel limit (or counts it wrong)."""
    cp, rid = world.cp, world.runner_id
    chans = await asyncio.gather(*(cp.open_channel(rid, check=False)
                                   for _ in range(MAX_CHANNELS)))
    failed = [c for c in chans if not (c.open_outcome and c.open_outcome.ok)]
    expect(not failed, expected=f"{MAX_CHANNELS} channels open",
           actual=f"{len(failed)} refused: {outcome_text(failed[0].open_outcome) if failed else ''}",
           witness=witness(world, "gateway.open", last=4))
    mark = _last_seq(world)
    extra = await cp.open_channel(rid, check=False)
    expect_error(world, extra.open_outcome, codes=("runner_error",),
                 what=f"gateway.open number {MAX_CHANNELS + 1}", needles=[extra.connection_id])
    expect_no_effect(world, "ws.connected", after_seq=mark, what="the refused 65th channel",
                     needles=[extra.connection_id])


@case("LIM-002", hermes_script="team")
async def test_65th_lease_is_refused(world: Any) -> None:
    """64 leases are created at once for one owned session; the 65th lease.create is refused
    with a plain error.

    fails when: the runner has no lease limit (or counts it wrong)."""
    cp = world.cp
    ch = await cp.open_channel(world.runner_id)
    sid = await new_session(world, ch)
    await event_for(ch, "session.info", sid)
    session = {"runtimeId": sid, "storedId": await stored_id(world, ch, sid)}
    leases = await asyncio.gather(*(cp.create_lease(ch, profile="default", session=session,
                                                    check=False) for _ in range(MAX_LEASES)))
    failed = [le for le in leases if not (le.create_outcome and le.create_outcome.ok)]
    expect(not failed, expected=f"{MAX_LEASES} leases created",
           actual=f"{len(failed)} refused: "
                  f"{outcome_text(failed[0].create_outcome) if failed else ''}",
           witness=witness(world, "lease.create", last=4))
    extra = await cp.create_lease(ch, profile="default", session=session, check=False)
    expect_error(world, extra.create_outcome, codes=("runner_error",),
                 what=f"lease.create number {MAX_LEASES + 1}", needles=[extra.lease_id])


@case("LIM-003")
async def test_hermes_body_over_8_mib_is_an_error(world: Any) -> None:
    """A download of a 9 MiB file inside an artifact root: Hermes answers 9 MiB, the runner must
    answer an error result (nothing relayed) and stay online.

    fails when: the runner relays (or truncates and relays) a Hermes body over 8 MiB."""
    big = world.artifact_root / "big.bin"
    big.write_bytes(b"\0" * (9 * MIB))
    epoch = world.cp.epoch(world.runner_id)
    out = await world.cp.command(world.runner_id, "http", {
        "path": "/api/files/download", "method": "GET",
        "search": f"?profile=default&path={big}"})
    expect_error(world, out, what="a 9 MiB Hermes body", needles=["big.bin"])
    await stays_online(world, epoch, what="after a Hermes body over 8 MiB")


@case("LIM-004")
async def test_unknown_kind_is_runner_command_unknown(world: Any) -> None:
    """A command of a kind the protocol does not have: runner_command_unknown, no effect.

    fails when: the runner answers an unknown kind with a success, another code, or not at
    all."""
    mark = _last_seq(world)
    out = await world.cp.command(world.runner_id, "hermes.bogus", {"x": 1}, as_sent=True)
    expect_error(world, out, codes=("runner_command_unknown",), what="an unknown kind",
                 needles=["hermes.bogus"])
    expect(not world.hermes.effects.of(after_seq=mark),
           expected="no Hermes effect for an unknown kind",
           actual=str([e.kind for e in world.hermes.effects.of(after_seq=mark)]))


@case("LIM-005")
async def test_payload_missing_fields_is_an_error(world: Any) -> None:
    """http, gateway.close and lease.close with an empty payload each get an error result; the
    runner keeps its connection and still serves a good command.

    fails when: the runner crashes, hangs or reconnects on a schema failure."""
    cp, rid = world.cp, world.runner_id
    epoch = cp.epoch(rid)
    mark = _last_seq(world)
    outs = await asyncio.gather(*(cp.command(rid, kind, {}, as_sent=True)  # malformed on purpose
                                  for kind in ("http", "gateway.close", "lease.close")))
    for kind, out in zip(("http", "gateway.close", "lease.close"), outs, strict=True):
        expect_error(world, out, what=f"{kind} with an empty payload", needles=[kind])
    expect(not world.hermes.effects.of(after_seq=mark),
           expected="no Hermes effect for malformed payloads",
           actual=str([e.kind for e in world.hermes.effects.of(after_seq=mark)]))
    await stays_online(world, epoch, what="after malformed payloads")


@case("LIM-006")
async def test_open_with_a_non_string_connection_id_is_an_error(world: Any) -> None:
    """gateway.open whose connectionId is a number: an error result, no Hermes socket.

    fails when: the runner opens a channel for any connectionId value."""
    cp, rid = world.cp, world.runner_id
    ch = await cp.open_channel(rid, connection_id=12345, check=False,  # type: ignore[arg-type]
                              as_sent=True)  # malformed on purpose
    expect_error(world, ch.open_outcome, what="gateway.open with connectionId 12345",
                 needles=["12345"])
    expect_no_effect(world, "ws.connected", what="a malformed gateway.open", needles=["12345"])


@case("LIM-007")
async def test_rpc_on_a_never_opened_channel_is_refused(world: Any) -> None:
    """A channel is registered on the control plane but its gateway.open is never sent; a
    session.create and a session.interrupt on it are refused and reach no Hermes handler
    (runner_connection_closed is the SHOULD code; any error passes).

    fails when: the runner opens a socket on demand for an unknown connectionId."""
    cp, rid = world.cp, world.runner_id
    ch = cp.hub.register_channel(rid, None, 0, None, False, None)
    create = await cp.rpc(ch, "session.create", {"profile": "default", "cols": 100})
    expect_error(world, create, what="session.create on a channel never opened",
                 needles=[ch.connection_id])
    stop = await cp.rpc(ch, "session.interrupt", {"session_id": "deadbeef"})
    expect_error(world, stop, what="session.interrupt on a channel never opened",
                 needles=[ch.connection_id])
    expect_no_effect(world, "ws.connected", what="RPCs on a channel never opened",
                     needles=[ch.connection_id])


@case("LIM-008")
async def test_hermes_rpc_error_is_an_error_result(world: Any) -> None:
    """session.steer without text makes Hermes answer a JSON-RPC error (4002); the runner
    answers an error result and the channel still serves session.usage.

    fails when: the runner answers a Hermes error as a success, or closes the channel on it."""
    cp = world.cp
    ch = await cp.open_channel(world.runner_id)
    sid = await new_session(world, ch)
    out = await cp.rpc(ch, "session.steer", {"session_id": sid})
    expect_error(world, out, what="session.steer that Hermes answers with error 4002",
                 needles=[sid])
    usage = await cp.rpc(ch, "session.usage", {"session_id": sid})
    expect_ok(world, usage, what="session.usage after the Hermes error", needles=[sid])


@case("LIM-009", start_runner=False)
async def test_hermes_unreachable_is_an_error_result(world: Any) -> None:
    """Hermes becomes unreachable (the proxy in front of it closes every connection): GET
    /api/status gets an error result, the runner keeps its epoch, and works again once Hermes
    is back.

    fails when: a Hermes failure crashes the runner or makes it disconnect/reset."""
    proxy = await start_behind_proxy(world)
    cp, rid = world.cp, world.runner_id
    epoch = cp.epoch(rid)
    proxy.cut()
    out = await cp.command(rid, "http", {"path": "/api/status", "method": "GET", "search": ""})
    expect_error(world, out, what="GET /api/status while Hermes is unreachable",
                 needles=["/api/status"])
    expect(cp.epoch(rid) == epoch and world.runner is not None and world.runner.running,
           expected=f"the runner still running in epoch {epoch}",
           actual=f"epoch {cp.epoch(rid)}, running {world.runner.running if world.runner else None}",
           witness=witness(world, "disconnected"))
    proxy.refuse = False
    await stays_online(world, epoch, what="once Hermes is reachable again")


@case("LIM-010")
async def test_extension_kind_not_advertised_is_an_error(world: Any) -> None:
    """network.configure on a runner that does not advertise a network feature: an error result
    (runner_command_unknown or runner_feature_unavailable, both conformant), no effect.

    fails when: a core runner accepts an extension kind it does not implement."""
    features = world.cp.features(world.runner_id)
    if any(f.startswith("network") for f in features):
        not_applicable(f"the runner advertises {features}")
    mark = _last_seq(world)
    out = await world.cp.command(world.runner_id, "network.configure", {"mode": "direct"},
                                 as_sent=True)  # an extension kind, on purpose
    expect_error(world, out, codes=("runner_command_unknown", "runner_feature_unavailable"),
                 what="network.configure on a core runner", needles=["network.configure"])
    expect(not world.hermes.effects.of(after_seq=mark),
           expected="no Hermes effect for an extension kind",
           actual=str([e.kind for e in world.hermes.effects.of(after_seq=mark)]))


@case("LIM-011", timings=Timings(poll_hold=2.0, redelivery=5.0))  # upstream's 5 s redelivery
async def test_command_near_the_36_mib_limit_is_handled(world: Any) -> None:
    """An http command of about 35.9 MiB (a large ignored body on GET /api/status) is delivered
    by one poll: the runner posts a result for it (success or error) and stays online.

    fails when: the runner reads poll answers with a limit below the protocol's 40 MiB, or
    dies on a large command."""
    cp, rid = world.cp, world.runner_id
    epoch = cp.epoch(rid)
    pad = "x" * (36 * MIB - 4096)
    handle = await cp.submit(rid, "http", {"path": "/api/status", "method": "GET", "search": "",
                                           "body": pad})
    del pad
    if handle.done() and handle.outcome is not None and handle.outcome.code == \
            "runner_payload_limit":
        raise CaseFailed("a command under 36 MiB is queued", outcome_text(handle.outcome))
    try:
        out = await handle.wait(30.0)
    finally:
        elide_large_bodies(world)  # keep the 36 MiB out of the transcript and the report
    results = [ex for ex in cp.history.filter(route="result") if ex.command_id == handle.id]
    expect(out.status in (200, 502) and results,
           expected="a result posted for the large command",
           actual=f"{outcome_text(out)}, {len(results)} result post(s)",
           witness=witness(world, handle.id, last=4))
    await stays_online(world, epoch, what="after a 36 MiB command")


@case("LIM-905", start_runner=False)
async def test_poll_answer_over_40_mib_is_not_read(world: Any) -> None:
    """The tap answers the runner's next poll with a valid poll body of 41 MiB carrying one
    command (a pad field makes it large). The runner should fail that poll (a reset poll
    follows) and not act on the command: no admit for its id.

    fails when: the runner reads a response of any size (memory blow-up on a hostile or broken
    server) and admits what it carries."""
    import uuid

    from aiohttp import web

    async with CannedTap(world.cp.url, token=world.registered.token,
                         secrets=world.secrets) as tap:
        await behind_canned(world, tap)
        cid = str(uuid.uuid4())
        epoch = world.cp.epoch(world.runner_id)
        command = {"id": cid, "kind": "http", "payload": {"method": "GET", "path": "/api/status"},
                   "expiresAt": 2**52, "pad": "x" * (41 * 1024 * 1024)}
        body = json.dumps({"epoch": epoch, "commands": [command]}).encode()
        tap.canned["poll"] = lambda request: web.Response(
            status=200, body=body, content_type="application/json")
        reset = await reset_poll_after_canned(world, tap)
    admits = [ex for ex in world.cp.history.entries if ex.route == "admit" and ex.command_id == cid]
    expect(not admits, expected="no admit for a command in a 41 MiB poll answer",
           actual=f"{len(admits)} admit(s)")
    expect(reset is not None, expected="a reset poll after the oversized answer",
           actual="no reset poll", witness=witness(world, last=6))


@case("LIM-901")
async def test_core_runner_refuses_memory_extract(world: Any) -> None:
    """fails when: a core runner (no computers) forwards POST …/memory-extract to Hermes, or
    refuses it with another code than memory_extraction_unavailable (e.g. runner_http_forbidden
    because rule 4 ran before rule 1)."""
    since = last_seq(world)
    out = await submit_http(world, {"path": "/api/plugins/yaoyao-bot-bridge/memory-extract",
                              "method": "POST", "search": "?profile=default",
                              "body": {"profile": "default", "prompt": "remember"}})
    expect(not out.ok and out.code == "memory_extraction_unavailable",
           expected="an error result memory_extraction_unavailable", actual=brief_outcome(out))
    expect(not effects_since(world, since), expected="no Hermes effect for memory-extract",
           actual=effects_since(world, since))


@case("LIM-902")
async def test_open_accepts_any_uuid_and_refuses_an_open_id(world: Any) -> None:
    """A gateway.open with a lower-case UUID that is not a version-4 one opens; a second
    gateway.open of the same, still open, connectionId is refused with a plain error
    (runner_error) and connects no second Hermes socket.

    fails when: the runner accepts only v4 UUIDs (or validates the version nibble), or opens a
    second socket / replaces the channel for an id that is already open, or refuses it with a
    specific code instead of runner_error."""
    import uuid

    cid = str(uuid.uuid1())  # lower case, version 1
    ch = await world.cp.open_channel(world.runner_id, profile="default", connection_id=cid,
                                     check=False)
    expect(ch.open_outcome is None or ch.open_outcome.ok,
           expected=f"gateway.open of the version-1 UUID {cid} opens",
           actual=brief_outcome(ch.open_outcome) if ch.open_outcome else "no outcome")
    since = last_seq(world)
    again = await world.cp.open_channel(world.runner_id, profile="default", connection_id=cid,
                                        check=False)
    out = again.open_outcome
    expect(out is not None and not out.ok and out.code == "runner_error",
           expected="a second gateway.open of an open id refused with runner_error",
           actual=brief_outcome(out) if out else "no outcome (opened)")
    new = [e for e in effects_since(world, since) if "ws.connected" in e]
    expect(not new, expected="no second Hermes socket for an id that is already open",
           actual=new)


@case("LIM-903")
async def test_rpc_on_a_channel_not_open_is_connection_closed(world: Any) -> None:
    """A channel registered on the control plane but never opened on the runner: an RPC on it
    is refused with runner_connection_closed.

    fails when: the runner refuses it with another code (runner_error, runner_session_forbidden)
    or forwards it."""
    cp, rid = world.cp, world.runner_id
    ch = cp.hub.register_channel(rid, None, 0, None, False, None)
    out = await cp.rpc(ch, "session.usage", {"session_id": "deadbeef"})
    expect_error(world, out, codes=("runner_connection_closed",),
                 what="session.usage on a channel that is not open", needles=[ch.connection_id])
