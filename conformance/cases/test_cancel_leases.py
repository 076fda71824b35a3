"""CAN — cancel races of leases: a close that overtakes a lease.create, lease.close
unbinding and stopping the listener, a create of a recently closed lease (rows:
conformance/rows/cancel.py)."""

from __future__ import annotations

from typing import Any

from conformance.marks import case
from conformance.verdict import CaseFailed, expect
from conformance.witness import witness

from ._helpers_channels import (
    WAIT,
    event_for,
    expect_error,
    expect_no_effect,
    expect_ok,
    new_session,
    one_batch,
    stored_id,
)


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
