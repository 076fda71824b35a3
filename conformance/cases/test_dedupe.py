"""Dedupe cases (DED): the ledger answers a known id from its row, never by running it again."""

from __future__ import annotations

import asyncio
from typing import Any

from conformance.marks import case
from conformance.verdict import expect
from conformance.witness import witness

from ._helpers_channels import (
    new_session,
    outcome_text,
)
from ._helpers_state import (
    CONFLICT,
    NOT_ADMITTED,
    UNCERTAIN,
    WAIT,
    Harness,
    admits_of,
    download,
    error_code,
    kill_on_effect,
    lease_session,
    open_session,
    prompt_effects,
    reads,
    reply_of,
    results_of,
    verdict,
    wait_result,
)


async def _run(world: Any, kind: str, payload: dict[str, Any], **kw: Any) -> tuple[Any, Any]:
    handle = await world.cp.submit(world.runner_id, kind, payload, **kw)
    return handle, await handle.wait(WAIT)


@case("DED-001")
async def test_double_delivery_in_one_batch_runs_once(world: Any) -> None:
    """fails when: a redelivered id in flight runs again (rerun-inflight-redelivery)."""
    world.cp.faults.duplicate_deliveries(1, mode="batch")
    payload = download(world)
    handle, out = await _run(world, "http", payload)
    copies = [f for f in world.cp.lifecycle.filter("delivered", command_id=handle.id)]
    expect(copies and max(int((f.detail or {}).get("copies", 1)) for f in copies) >= 2,
           expected="the harness delivered the command twice in one batch",
           actual=f"deliveries {[(f.detail or {}) for f in copies]}",
           witness=witness(world, handle.id, effects=True))
    await wait_result(world, handle.id)
    replies = [reply_of(ex) for ex in results_of(world, handle.id)]
    expect(out.ok and len({str(r) for r in replies}) == 1,
           expected="one reply for both deliveries (one result post, or equal ones)",
           actual=f"outcome {out.status} {out.code}; {len(replies)} result posts, "
                  f"{len({str(r) for r in replies})} distinct",
                  witness=witness(world, handle.id, effects=True))
    expect(reads(world, payload) == 1, expected="Hermes served the file once",
           actual=f"{reads(world, payload)} file.read effects",
           witness=witness(world, handle.id, effects=True))
    verdict(world)


@case("DED-002")
async def test_replay_of_completed_id_gets_stored_reply(world: Any) -> None:
    """fails when: the claim upserts its row so every delivery runs (claim-upserts)."""
    payload = download(world)
    first, out1 = await _run(world, "http", payload)
    expect(out1.ok, expected="the download succeeds", actual=f"{out1.status} {out1.code}",
           witness=witness(world, first.id, effects=True))
    again = await world.cp.replay(world.runner_id, first.wire)
    out2 = await again.wait(WAIT)
    expect(out2.ok and out2.result == out1.result, expected="the replay gets the stored reply",
           actual=f"{out2.status} {out2.code} (same result: {out2.result == out1.result})",
           witness=witness(world, first.id, effects=True))
    expect(reads(world, payload) == 1, expected="no second Hermes call for the replay",
           actual=f"{reads(world, payload)} file.read effects",
           witness=witness(world, first.id, effects=True))
    verdict(world)


@case("DED-003")
async def test_same_id_other_payload_is_conflict(world: Any) -> None:
    """fails when: dedupe is by id only, the payload is not fingerprinted (ignore-fingerprint)."""
    first_payload, other = download(world, "a.txt"), download(world, "b.txt", b"other\n")
    first, out1 = await _run(world, "http", first_payload)
    expect(out1.ok, expected="the first download succeeds", actual=f"{out1.status} {out1.code}")
    again = await world.cp.replay(world.runner_id, first.wire, payload=other)
    out2 = await again.wait(WAIT)
    expect(out2.code == CONFLICT, expected=f"the replay with another payload: {CONFLICT}",
           actual=f"{out2.status} {out2.code} {out2.message}",
           witness=witness(world, first.id, effects=True))
    expect(reads(world, other) == 0 and reads(world, first_payload) == 1,
           expected="no Hermes effect for the conflicting payload",
           actual=f"b.txt read {reads(world, other)}x, a.txt {reads(world, first_payload)}x",
           witness=witness(world, first.id, effects=True))


@case("DED-004")
async def test_replays_after_restart_come_from_the_ledger(world: Any) -> None:
    """fails when: the ledger is not durable (ledger-in-memory), a started row runs again
    (rerun-started-rows), or dedupe ignores the payload (ignore-fingerprint)."""
    h = Harness(world)
    done_payload, started_payload = download(world, "done.txt"), download(world, "started.txt")
    done, out1 = await _run(world, "http", done_payload)
    expect(out1.ok, expected="the first download succeeds", actual=f"{out1.status} {out1.code}")
    fired = kill_on_effect(world, "file.read",
                           lambda e: str(e.detail.get("resolved", "")).endswith("started.txt"))
    started = await world.cp.submit(world.runner_id, "http", started_payload)
    await world.runner.wait(WAIT)
    expect(fired, expected="the runner was killed inside Hermes", actual="it was not")
    h.kill("during_hermes", command_id=started.id)
    h.start()
    await world.start_runner()
    h.started()
    h.start()
    await world.restart_runner()  # the SIGTERM restart of the upstream test
    h.started()
    checks = [
        ("completed id", done.wire, None, lambda o: o.ok and o.result == out1.result, "the stored reply"),
        ("other payload", done.wire, download(world, "other.txt"), lambda o: o.code == CONFLICT, CONFLICT),
        ("started row", started.wire, None, lambda o: o.code == UNCERTAIN, UNCERTAIN),
    ]
    for name, wire, payload, ok, want in checks:
        handle = await world.cp.replay(world.runner_id, wire, payload=payload)
        out = await handle.wait(WAIT)
        expect(ok(out), expected=f"replay of the {name} after the restart: {want}",
               actual=f"{out.status} {out.code} {out.message or ''}",
               witness=witness(world, wire["id"], effects=True))
    expect(reads(world, done_payload) == 1 and reads(world, started_payload) == 1,
           expected="no replay reached Hermes",
           actual=f"done.txt read {reads(world, done_payload)}x, started.txt "
                  f"{reads(world, started_payload)}x",
                  witness=witness(world, started.id, effects=True))
    # INV-6 left out: the checker orders a held poll's deliveries by the poll's receipt seq, so a
    # conflicting replay delivered by a poll held before the previous result looks like the same
    # fingerprint (reported to the checker's owner); the stored reply is checked above.
    verdict(world, h, invariants=("INV-1", "INV-7"))


@case("DED-005", manual_clock=True)
async def test_redelivery_in_flight_does_not_run_twice(world: Any) -> None:
    """fails when: a redelivered command still in flight runs again (rerun-inflight-redelivery)."""
    ch, sid = await open_session(world)
    pause = world.hermes.pause_at("before prompt.accept", session_id=sid)
    handle = await world.cp.submit_rpc(ch, "prompt.submit", {"session_id": sid, "text": "hello"})
    await pause.reached(timeout=WAIT)
    seen = len(world.cp.lifecycle.filter("delivered", command_id=handle.id))
    world.cp.clock.advance(world.cp.timings.redelivery + 0.5)
    await world.cp.lifecycle.wait_for(lambda f: f.kind == "delivered" and f.command_id == handle.id,
                                      timeout=WAIT, after_seq=world.cp.lifecycle.filter(
                                          "delivered", command_id=handle.id)[-1].seq)
    expect(len(world.cp.lifecycle.filter("delivered", command_id=handle.id)) > seen,
           expected="the command was redelivered while held", actual="no redelivery")
    pause.release()
    out = await handle.wait(WAIT)
    expect(out.ok, expected="prompt.submit answered", actual=f"{out.status} {out.code}",
           witness=witness(world, handle.id, effects=True))
    await world.hermes.effects.wait_for("turn.finished", timeout=WAIT, session_id=sid)
    n = len(prompt_effects(world, sid))
    expect(n == 1, expected="the prompt reached Hermes once", actual=f"{n} prompt effects",
           witness=witness(world, handle.id, effects=True))
    verdict(world)


@case("DED-006")
async def test_replayed_prompt_reaches_hermes_once(world: Any) -> None:
    """fails when: the claim upserts its row so a replay runs (claim-upserts)."""
    ch, sid = await open_session(world)
    first = await world.cp.submit_rpc(ch, "prompt.submit", {"session_id": sid, "text": "hello"})
    out1 = await first.wait(WAIT)
    expect(out1.ok, expected="prompt.submit answered", actual=f"{out1.status} {out1.code}")
    await world.hermes.effects.wait_for("turn.finished", timeout=WAIT, session_id=sid)
    again = await world.cp.submit(world.runner_id, "gateway.rpc", first.wire["payload"],
                                  channel=ch, command_id=first.id,
                                  expires_at_ms=first.wire["expiresAt"])
    out2 = await again.wait(WAIT)
    expect(out2.ok and out2.result == out1.result, expected="the replay gets the stored reply",
           actual=f"{out2.status} {out2.code} {out2.result}",
           witness=witness(world, first.id, effects=True))
    n = len(prompt_effects(world, sid))
    expect(n == 1, expected="the prompt reached Hermes once", actual=f"{n} prompt effects",
           witness=witness(world, first.id, effects=True))
    verdict(world)


@case("DED-007")
async def test_replayed_lease_create_makes_one_lease(world: Any) -> None:
    """fails when: the claim upserts its row so the replayed lease.create runs again and is
    refused as a duplicate lease id (claim-upserts)."""
    ch, sid = await open_session(world)
    lease = await world.cp.create_lease(ch, profile="default", session=lease_session(ch, sid))
    wire = next(d for d in _delivered(world) if d.get("kind") == "lease.create")
    first = results_of(world, wire["id"])
    again = await world.cp.submit(world.runner_id, "lease.create", wire["payload"], lease=lease,
                                  command_id=wire["id"], expires_at_ms=wire["expiresAt"])
    out2 = await again.wait(WAIT)
    expect(out2.ok and [reply_of(ex) for ex in first][:1] == [{"result": out2.result}],
           expected="the replayed lease.create gets the stored reply",
           actual=f"{out2.status} {out2.code} {out2.message or ''} {out2.result}",
           witness=witness(world, wire["id"], effects=True))
    bound = await world.cp.bind_lease(lease, lease_session(ch, sid))
    expect(bound.ok, expected="the lease binds", actual=f"{bound.status} {bound.code} {bound.message}",
           witness=witness(world, wire["id"], effects=True))
    binds = world.hermes.effects.count("bind")
    expect(binds == 1, expected="one bind for the lease", actual=f"{binds} bind effects",
           witness=witness(world, wire["id"], routes=("result",), effects=True))


def _delivered(world: Any) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for ex in world.cp.history.entries:
        if ex.route == "poll" and isinstance(ex.response_body, dict):
            out += [c for c in ex.response_body.get("commands") or [] if isinstance(c, dict)]
    return out


@case("DED-008")
async def test_stored_refusal_is_replayed_without_admit(world: Any) -> None:
    """fails when: refusals are not stored (refusals-not-stored: the row stays started, the
    replay is uncertain), or the runner asks admit again and executes."""
    payload = download(world)
    world.cp.faults.fail_next("admit", status=503, code="service_unavailable")
    first, out1 = await _run(world, "http", payload)
    expect(out1.code == NOT_ADMITTED, expected=f"a failed admit: {NOT_ADMITTED}",
           actual=f"{out1.status} {out1.code}", witness=witness(world, first.id, effects=True))
    admits = len(admits_of(world, first.id))
    again = await world.cp.replay(world.runner_id, first.wire)
    out2 = await again.wait(WAIT)
    ex = results_of(world, first.id)
    expect(out2.code == out1.code and len(ex) >= 2 and reply_of(ex[-1]) == reply_of(ex[0]),
           expected="the replay gets the same refusal", actual=f"{out2.status} {out2.code} "
           f"({error_code(ex[-1]) if ex else None})",
           witness=witness(world, first.id, effects=True))
    expect(len(admits_of(world, first.id)) == admits and reads(world, payload) == 0,
           expected="no new admit and no effect for the replay",
           actual=f"{len(admits_of(world, first.id)) - admits} new admits, "
                  f"{reads(world, payload)} file.read effects",
                  witness=witness(world, first.id, effects=True))


@case("DED-901")
async def test_conflict_answered_while_the_original_runs(world: Any) -> None:
    """A prompt.submit is held inside Hermes (before prompt.accept); the control plane gives up
    on it and delivers the same id with another payload: the runner answers
    idempotency_conflict at once, while the original is still held, and the original's prompt
    reaches Hermes once.

    fails when: the runner applies the in-flight rule before the fingerprint (the conflicting
    delivery waits for, then shares, the original's reply)."""
    cp = world.cp
    ch = await cp.open_channel(world.runner_id)
    sid = await new_session(world, ch)
    pause = world.hermes.pause_at("before prompt.accept", session_id=sid)
    handle = await cp.submit_rpc(ch, "prompt.submit", {"session_id": sid, "text": "hello"})
    await pause.reached(timeout=WAIT)
    handle.expire()   # the control plane ends it; the runner still runs it
    other = {**handle.wire["payload"], "params": {"session_id": sid, "text": "other"}}
    try:
        replay = await cp.replay(world.runner_id, handle.wire, payload=other)
        out = await replay.wait(WAIT)
    except TimeoutError:
        out = None
    finally:
        pause.release()
    expect(out is not None and not out.ok and out.code == "idempotency_conflict",
           expected="idempotency_conflict while the original is in flight",
           actual=outcome_text(out), witness=witness(world, handle.id))
    await world.hermes.effects.wait_for("turn.finished", timeout=WAIT, session_id=sid)
    n = len(prompt_effects(world, sid))
    expect(n == 1, expected="the original prompt reached Hermes once", actual=n)
#: commands after the one replayed in DED-902: past the 256th (a compaction, protocol §4.4)
LATER_COMMANDS = 300
WAVE = 50


@case("DED-902")
async def test_receipt_survives_many_later_commands(world: Any) -> None:
    """fails when: the ledger keeps only its newest receipts, a size cap where the protocol
    has an age (receipt-cap)."""
    payload = download(world, "first.txt")
    first, out1 = await _run(world, "http", payload)
    expect(out1.ok, expected="the download succeeds", actual=f"{out1.status} {out1.code}",
           witness=witness(world, first.id, effects=True))
    status = {"method": "GET", "path": "/api/status", "search": ""}
    for _ in range(LATER_COMMANDS // WAVE):
        handles = [await world.cp.submit(world.runner_id, "http", status) for _ in range(WAVE)]
        outs = await asyncio.gather(*(h.wait(WAIT) for h in handles))
        bad = [o for o in outs if not o.ok]
        expect(not bad, expected=f"{WAVE} GET /api/status commands complete",
               actual=f"{len(bad)} did not: {bad[0].status} {bad[0].code}" if bad else "")
    again = await world.cp.replay(world.runner_id, first.wire)
    out2 = await again.wait(WAIT)
    expect(out2.ok and out2.result == out1.result,
           expected=f"the replay after {LATER_COMMANDS} later commands gets the stored reply",
           actual=f"{out2.status} {out2.code} (same result: {out2.result == out1.result})",
           witness=witness(world, first.id, effects=True))
    expect(reads(world, payload) == 1, expected="no second Hermes call for the replay",
           actual=f"{reads(world, payload)} file.read effects",
           witness=witness(world, first.id, effects=True))
    verdict(world)
