"""CAN — cancel races: closes that overtake opens, slow RPCs, interrupts, tombstones, admits
pending while a permission changes (rows: conformance/rows/cancel.py)."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from conformance.bounds import scaled
from conformance.marks import case
from conformance.verdict import CaseFailed, expect

from ._helpers_channels import (
    WAIT,
    effects_of,
    event_for,
    expect_error,
    expect_no_effect,
    expect_ok,
    new_session,
    one_batch,
    open_sockets,
    outcome_text,
    prompt,
    socket_of,
    start_behind_proxy,
    stored_id,
    witness,
    ws_closed,
)


@case("CAN-001", start_runner=False)
async def test_close_overtaking_a_pending_open_leaves_no_channel(world: Any) -> None:
    """gateway.open is held in the Hermes WebSocket handshake (a proxy holds the upgrade); a
    gateway.close for the same id is answered meanwhile; once the handshake is let through, no
    channel may live: its socket closes and an RPC on the id is refused without reaching Hermes.

    fails when: the runner registers the channel only after the handshake completed (the close
    finds nothing, the late open then revives the channel and the socket stays open)."""
    proxy = await start_behind_proxy(world)
    cp, rid = world.cp, world.runner_id
    proxy.hold(r"^GET /api/ws")
    ch, opening = await cp.submit_open_channel(rid)
    await asyncio.wait_for(proxy.held.get(), scaled(WAIT))
    close = await cp.command(rid, "gateway.close", {"connectionId": ch.connection_id})
    expect_ok(world, close, what="gateway.close while the open is held in the handshake",
              needles=[ch.connection_id])
    proxy.release()
    await opening.wait(WAIT)
    for sock in open_sockets(world):
        if await ws_closed(world, sock) is None:
            raise CaseFailed("no Hermes socket alive after the close overtook the open",
                             f"socket {sock} still open (open answered "
                             f"{outcome_text(opening.outcome)})",
                             witness(world, ch.connection_id, "ws."))
    if not ch.closed.is_set():
        out = await cp.rpc(ch, "session.create", {"profile": "default", "cols": 100})
        expect_error(world, out, what="session.create on the overtaken channel",
                     needles=[ch.connection_id])
    expect_no_effect(world, "session.created", what="after the close overtook the open",
                     needles=[ch.connection_id])


@case("CAN-002")
async def test_close_is_answered_while_an_rpc_is_held(world: Any) -> None:
    """session.usage is held inside Hermes (pause point before the method); gateway.close must be
    answered while it is still held.

    fails when: the runner runs a channel's commands one at a time, or the close waits for the
    channel's pending RPCs."""
    cp, rid = world.cp, world.runner_id
    ch = await cp.open_channel(rid)
    sid = await new_session(world, ch)
    pause = world.hermes.pause_at("before session.usage", session_id=sid)
    slow = await cp.submit_rpc(ch, "session.usage", {"session_id": sid})
    await pause.reached(timeout=WAIT)
    try:
        close = await asyncio.wait_for(cp.close_channel(ch), scaled(WAIT))
    except TimeoutError:
        raise CaseFailed("gateway.close answered while session.usage is held in Hermes",
                         f"no close result within {WAIT} s",
                         witness(world, ch.connection_id)) from None
    finally:
        pause.release()
    expect_ok(world, close, what="gateway.close during a held RPC", needles=[ch.connection_id])
    await slow.wait(WAIT)


@case("CAN-003")
async def test_close_interrupts_running_sessions_first(world: Any) -> None:
    """A turn is running (HANGTEST waits for an interrupt); gateway.close must send
    session.interrupt for it before the Hermes socket closes.

    fails when: gateway.close only closes the socket (no interrupt)."""
    cp, rid = world.cp, world.runner_id
    ch = await cp.open_channel(rid)
    sid = await new_session(world, ch)
    sock = await socket_of(world, sid)
    await prompt(world, ch, sid, "HANGTEST")
    await world.hermes.effects.wait_for("prompt.accepted", timeout=WAIT, session_id=sid)
    close = await cp.close_channel(ch)
    expect_ok(world, close, what="gateway.close", needles=[ch.connection_id])
    closed = await ws_closed(world, sock)
    interrupts = effects_of(world, "session.interrupted", session_id=sid)
    expect(interrupts and (closed is None or interrupts[0].seq < closed.seq),
           expected=f"session.interrupt for running session {sid} before its socket closes",
           actual=f"interrupts {[e.seq for e in interrupts]}, ws.closed "
                  f"{closed.seq if closed else None}",
           witness=witness(world, sid, "ws.closed"))


@case("CAN-004")
async def test_open_of_a_recently_closed_id_fails(world: Any) -> None:
    """A channel is opened and closed; a gateway.open of the same connectionId right after must
    fail and connect no new Hermes socket.

    fails when: the runner does not tombstone closed connection ids."""
    cp, rid = world.cp, world.runner_id
    ch = await cp.open_channel(rid)
    expect_ok(world, await cp.close_channel(ch), what="gateway.close", needles=[ch.connection_id])
    mark = world.hermes.effects.entries[-1].seq if world.hermes.effects.entries else 0
    again = await cp.open_channel(rid, connection_id=ch.connection_id, check=False)
    expect_error(world, again.open_outcome, what="gateway.open of an id closed just now",
                 needles=[ch.connection_id])
    expect_no_effect(world, "ws.connected", after_seq=mark,
                     what="a refused re-open of a tombstoned id", needles=[ch.connection_id])


async def _lease_ready(world: Any) -> tuple[Any, str, str | None]:
    ch = await world.cp.open_channel(world.runner_id)
    sid = await new_session(world, ch)
    await event_for(ch, "session.info", sid)
    return ch, sid, await stored_id(world, ch, sid)


@case("CAN-005", hermes_script="team")
async def test_close_overtaking_create_leaves_no_lease(world: Any) -> None:
    """lease.create and lease.close of one lease come in one poll answer (both admitted, run
    concurrently). Whichever wins, no lease may be left: a lease.bind afterwards is refused
    (runner_lease_expired) and the plugin never sees a bind.

    Then a second lease whose close reaches the runner first (answered before its create is
    delivered): lease.close tombstones the id whether or not the lease exists (3.7), so the
    create that follows is refused with an error and nothing binds.

    fails when: lease.close of a lease still being created (or not yet created) leaves it to
    live on: no check after the listener started whether a close overtook it, or no tombstone
    for a close that came first (the lease stays alive and binds). Which of the two races the
    batch meets depends on the runner's scheduling; the close-first lease always meets the
    second."""
    cp, rid = world.cp, world.runner_id
    ch, sid, stored = await _lease_ready(world)
    session = {"runtimeId": sid, "storedId": stored}
    await _close_reaches_first(world, ch, session)
    lease = cp.hub.register_lease(ch, "default", dict(session), [], {})
    create_payload = {"leaseId": lease.lease_id, "profile": "default",
                      "workId": lease.lease_id, "session": session, "catalog": [],
                      "workspaceMemory": False}
    create = await cp.submit(rid, "lease.create", create_payload, profile="default",
                             channel=ch, lease=lease)
    close = await cp.submit(rid, "lease.close", {"leaseId": lease.lease_id})
    batched = await one_batch(world, create, close)
    await create.wait(WAIT)
    expect_ok(world, await close.wait(WAIT), what="lease.close", needles=[lease.lease_id])
    bind = await cp.bind_lease(lease, session)
    expect_error(world, bind, codes=("runner_lease_expired",),
                 what=f"lease.bind after the close (one batch: {batched})",
                 needles=[lease.lease_id])
    expect_no_effect(world, "bind", what="a lease closed while being created",
                     needles=[lease.lease_id])


async def _close_reaches_first(world: Any, ch: Any, session: dict[str, Any]) -> None:
    cp, rid = world.cp, world.runner_id
    lease = cp.hub.register_lease(ch, "default", dict(session), [], {})
    close = await cp.submit(rid, "lease.close", {"leaseId": lease.lease_id})
    await close.wait(WAIT)  # {ok:true} is a SHOULD for an unknown id (3.7): either answer passes
    create = await cp.submit(rid, "lease.create", {
        "leaseId": lease.lease_id, "profile": "default", "workId": lease.lease_id,
        "session": session, "catalog": [], "workspaceMemory": False},
        profile="default", channel=ch, lease=lease)
    expect_error(world, await create.wait(WAIT),
                 what="lease.create of an id whose close came first (tombstoned)",
                 needles=[lease.lease_id])
    bind = await cp.bind_lease(lease, session)
    expect_error(world, bind, codes=("runner_lease_expired",),
                 what="lease.bind of a lease whose close came before its create",
                 needles=[lease.lease_id])
    expect_no_effect(world, "bind", what="a lease closed before its create",
                     needles=[lease.lease_id])


@case("CAN-006", hermes_script="team")
async def test_lease_close_unbinds_and_stops_serving(world: Any) -> None:
    """A created and bound lease is closed: the plugin gets its unbind and the listener no
    longer serves the bridge token it was bound with.

    fails when: lease.close forgets the unbind, or leaves the loopback listener serving."""
    cp = world.cp
    ch, sid, stored = await _lease_ready(world)
    lease = await cp.create_lease(ch, profile="default",
                                  session={"runtimeId": sid, "storedId": stored})
    expect_ok(world, await cp.bind_lease(lease), what="lease.bind", needles=[lease.lease_id])
    await world.hermes.effects.wait_for("bind", timeout=WAIT, session_id=sid)
    binding = dict(world.hermes.bridge.bindings.get(sid) or {})
    expect_ok(world, await cp.close_lease(lease), what="lease.close", needles=[lease.lease_id])
    try:
        await world.hermes.effects.wait_for("unbind", timeout=WAIT, session_id=sid)
    except TimeoutError:
        raise CaseFailed("an unbind for the closed lease", "no unbind effect",
                         witness(world, sid, "bind")) from None
    url, token = binding.get("bridge_url"), binding.get("token")
    if not (isinstance(url, str) and isinstance(token, str)):
        raise CaseFailed("a bind with bridge_url and token", f"bind keys {sorted(binding)}")
    status = await _post_tools_list(url, token)
    world.secrets.add("bridge token", token)
    expect(status != 200, expected="the closed lease's listener refuses its old token",
           actual=f"tools/list answered {status}", witness=witness(world, sid, "bind"))


async def _post_tools_list(url: str, token: str) -> int | None:
    import aiohttp

    try:
        async with aiohttp.ClientSession() as http, http.post(
                url.rstrip("/") + "/tools/list", json={},
                headers={"Authorization": f"Bearer {token}"},
                timeout=aiohttp.ClientTimeout(total=WAIT)) as resp:
            return resp.status
    except aiohttp.ClientError:
        return None  # nothing listens any more


@case("CAN-007", hermes_script="team")
async def test_create_of_a_recently_closed_lease_fails(world: Any) -> None:
    """A lease is created and closed; a lease.create with the same leaseId right after must fail
    (the id is tombstoned), and no bind of it works.

    fails when: the runner does not tombstone closed lease ids."""
    cp, rid = world.cp, world.runner_id
    ch, sid, stored = await _lease_ready(world)
    session = {"runtimeId": sid, "storedId": stored}
    lease = await cp.create_lease(ch, profile="default", session=session)
    closed = await cp.command(rid, "lease.close", {"leaseId": lease.lease_id})
    expect_ok(world, closed, what="lease.close", needles=[lease.lease_id])
    again = await cp.submit(rid, "lease.create", {
        "leaseId": lease.lease_id, "profile": "default", "workId": lease.lease_id,
        "session": session, "catalog": [], "workspaceMemory": False},
        profile="default", channel=ch, lease=lease)
    expect_error(world, await again.wait(WAIT), what="lease.create of an id closed just now",
                 needles=[lease.lease_id])
    expect_error(world, await cp.bind_lease(lease), codes=("runner_lease_expired",),
                 what="lease.bind of the tombstoned lease", needles=[lease.lease_id])


@case("CAN-008")
async def test_interrupt_rpc_reaches_hermes(world: Any) -> None:
    """session.interrupt as gateway.rpc on a running turn must reach Hermes (after its admit)
    and end the turn as interrupted.

    fails when: the runner swallows session.interrupt (answers without sending it)."""
    cp = world.cp
    ch = await cp.open_channel(world.runner_id)
    sid = await new_session(world, ch)
    await prompt(world, ch, sid, "HANGTEST")
    await world.hermes.effects.wait_for("prompt.accepted", timeout=WAIT, session_id=sid)
    handle = await cp.submit_rpc(ch, "session.interrupt", {"session_id": sid})
    out = await handle.wait(WAIT)
    expect_ok(world, out, what="session.interrupt", needles=[sid])
    found = effects_of(world, "session.interrupted", session_id=sid)
    admits = [ex for ex in cp.history.filter(route="admit") if ex.command_id == handle.id]
    expect(found and admits and admits[0].seq_out is not None
           and admits[0].seq_out < found[0].seq,
           expected="a session.interrupted effect after the interrupt's admit",
           actual=f"effects {[e.seq for e in found]}, admit {[a.seq_out for a in admits]}",
           witness=witness(world, sid, handle.id))
    done = await event_for(ch, "message.complete", sid)
    expect((done.get("payload") or {}).get("status") == "interrupted",
           expected="the turn ends interrupted", actual=str(done.get("payload"))[:200])


async def _account_channel(world: Any) -> tuple[Any, str, str]:
    name = f"acct-{uuid.uuid4().hex[:8]}"
    await world.cp.create_account(name, allowed_profiles=("default",))
    ch = await world.cp.open_channel(world.runner_id, account=name, profile="default")
    sid = await new_session(world, ch)
    return ch, sid, name


@case("CAN-009", manual_clock=True)
async def test_permission_change_while_admit_pending(world: Any) -> None:
    """The admit of a prompt.submit is held (a delayed admit answer on the control-plane clock);
    meanwhile the account's authorization changes. The admit then says no: the runner answers
    runner_command_not_admitted and Hermes never receives the prompt.

    fails when: the runner executes without waiting for admit, or on a failed/refused admit."""
    cp = world.cp
    ch, sid, account = await _account_channel(world)
    hold = 7.0  # a due time no other timer of the world has
    due = world.clock.now() + hold
    cp.faults.delay_next("admit", seconds=hold)
    handle = await cp.submit_rpc(ch, "prompt.submit", {"session_id": sid, "text": "hello"})
    await world.clock.wait_pending(due, timeout=WAIT)  # the admit answer sleeps on the clock
    await cp.bump_authorization(account)
    world.clock.advance(hold)
    out = await handle.wait(WAIT)
    expect_error(world, out, codes=("runner_command_not_admitted",),
                 what="prompt.submit whose admit was pending across a permission change",
                 needles=[handle.id, sid])
    expect_no_effect(world, "prompt.accepted", session_id=sid,
                     what="prompt not admitted", needles=[handle.id, sid])


@case("CAN-010", manual_clock=True)
async def test_queued_command_after_authorization_change(world: Any) -> None:
    """A prompt.submit is queued while the runner's next poll is held; the account's
    authorization changes before it is delivered. It must not run: runner_command_not_admitted
    and no prompt reaches Hermes.

    fails when: the runner executes a delivered command without admit (or caches an earlier
    allowed answer for the channel)."""
    cp, rid = world.cp, world.runner_id
    ch, sid, account = await _account_channel(world)
    await cp.poll_held(rid)
    hold = 7.0
    cp.faults.delay_next("poll", seconds=hold)
    world.clock.advance(world.timings.poll_hold)  # end the held poll; the next one is delayed
    due = world.clock.now() + hold
    await world.clock.wait_pending(due, timeout=WAIT)
    handle = await cp.submit_rpc(ch, "prompt.submit", {"session_id": sid, "text": "hello"})
    expect(handle.state == "queued", expected="the prompt is still queued (poll held)",
           actual=handle.state)
    await cp.bump_authorization(account)
    world.clock.advance(hold)
    out = await handle.wait(WAIT)
    expect_error(world, out, codes=("runner_command_not_admitted",),
                 what="a queued prompt.submit after the authorization changed",
                 needles=[handle.id, sid])
    expect(handle.deliveries >= 1, expected="the runner was given the command (and refused it)",
           actual=f"lifecycle {cp.lifecycle.kinds(handle.id)}")
    expect_no_effect(world, "prompt.accepted", session_id=sid,
                     what="prompt queued across an authorization change", needles=[sid])


@case("CAN-011")
async def test_close_after_failed_open(world: Any) -> None:
    """A gateway.open with a computer target fails on a core runner; the control plane then
    closes the same id (as upstream does) and the harness closes it once more. Both closes are
    answered without error and no Hermes socket was ever opened.

    fails when: closing an id whose open failed answers an error (or the failed open left a
    socket)."""
    cp, rid = world.cp, world.runner_id
    computer = {"id": str(uuid.uuid4()), "ownerKey": "0" * 64}
    ch = await cp.open_channel(rid, check=False, computer=computer, workId=str(uuid.uuid4()))
    expect_error(world, ch.open_outcome, what="gateway.open with a computer target on a core "
                 "runner", needles=[ch.connection_id])
    out = await cp.command(rid, "gateway.close", {"connectionId": ch.connection_id})
    expect_ok(world, out, what="gateway.close after the failed open", needles=[ch.connection_id])
    expect_no_effect(world, "ws.connected", what="a failed gateway.open",
                     needles=[ch.connection_id])
