"""TT — team tools, the lease's binding: lease.bind calls the plugin's bind, lease.close unbinds,
the binds the runner must refuse, and a bind repeated when the stored session id changed
while it was in flight (§3.6–3.7, §6.4).

Each case creates an owned session on a channel and a lease through the control plane, and reads
the plugin's side (bind / unbind effects, the binding) from the scripted Hermes.
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

from conformance.bounds import scaled
from conformance.marks import case
from conformance.verdict import expect
from conformance.witness import lines_of, witness

from ._helpers_channels import WAIT, outcome_text
from ._helpers_process import (
    TOOLS,
    bound_lease,
    listener,
    owned_session,
    refuses_connection,
)


@case("TT-001")
async def test_bind_carries_bridge_url_token_session_generation(world: Any) -> None:
    """fails when: the runner binds without the lease's session ids, with a non-loopback or
    missing bridge_url, an empty token, or never calls the plugin's bind."""
    b = await bound_lease(world)
    effects = world.hermes.effects.of("bind", session_id=b.session["runtimeId"])
    shown = lines_of(world, effects)
    expect(len(effects) == 1, expected="one bind for the lease's session", actual=len(effects),
           witness=shown)
    got = b.binding
    expect(got.get("session_id") == b.session["runtimeId"]
           and got.get("stored_session_id") == b.session["storedId"],
           expected=f"bind for session {b.session}",
           actual=f"{got.get('session_id')} / {got.get('stored_session_id')}", witness=shown)
    expect(re.match(r"^http://127\.0\.0\.1:\d+/?$", str(got.get("bridge_url", ""))) is not None,
           expected="bridge_url http://127.0.0.1:<port>", actual=got.get("bridge_url"),
           witness=shown)
    expect(isinstance(got.get("token"), str) and len(got["token"]) >= 32,
           expected="a lease token of >= 32 chars", actual=f"{len(str(got.get('token') or ''))} chars",
           witness=shown)
    expect(isinstance(got.get("generation"), str) and bool(got["generation"]),
           expected="a non-empty generation", actual=got.get("generation"), witness=shown)
    expect(got.get("profile") == "default", expected="profile default", actual=got.get("profile"),
           witness=shown)


@case("TT-014")
async def test_bind_of_unknown_or_closed_lease_is_expired(world: Any) -> None:
    """fails when: the runner binds (or answers ok to) a lease.bind for a lease it never created
    or already closed, instead of runner_lease_expired."""
    cp = world.cp
    b = await bound_lease(world, bind=False)
    closed = await cp.command(world.runner_id, "lease.close", {"leaseId": b.lease.lease_id},
                              profile="default")
    expect(closed.ok, expected="lease.close → ok", actual=f"{closed.status} {closed.code}")
    after_close = await cp.bind_lease(b.lease)  # the hub lease is still active: admitted
    never = cp.hub.register_lease(b.channel, "default", dict(b.session), [dict(t) for t in TOOLS],
                                  {})  # a hub lease the runner was never told about
    unknown = await cp.bind_lease(never)
    for name, out in (("a closed lease", after_close), ("a never-created lease", unknown)):
        expect(not out.ok and out.code == "runner_lease_expired",
               expected=f"lease.bind of {name} → runner_lease_expired",
               actual=f"{out.status} {out.code}")
    binds = world.hermes.effects.of("bind", session_id=b.session["runtimeId"])
    expect(not binds, expected="no bind", actual=f"{len(binds)} bind effect(s)")


@case("TT-016")
async def test_lease_close_unbinds_and_closes_the_listener(world: Any) -> None:
    """fails when: lease.close forgets the plugin's unbind (or sends another generation or
    session), or leaves the listener serving."""
    b = await bound_lease(world)
    out = await world.cp.close_lease(b.lease)
    expect(out.ok, expected="lease.close → ok", actual=f"{out.status} {out.code}")
    try:
        unbind = await world.runner.guard(world.hermes.effects.wait_for(
            "unbind", timeout=WAIT + 1, session_id=b.session["runtimeId"]), "the plugin's unbind", WAIT)
    except TimeoutError:
        expect(False, expected=f"an unbind of session {b.session['runtimeId']} within {WAIT:.0f} s "
                               "(scaled) of lease.close answered ok (the close unbinds first)",
               actual=f"no unbind effect; the runner still runs; Hermes saw "
                      f"{[e.kind for e in world.hermes.effects.entries][-6:]}",
               witness=witness(world, b.lease.lease_id))
        raise
    expect(unbind.detail.get("generation") == b.binding["generation"]
           and unbind.detail.get("removed") is True,
           expected=f"unbind of session {b.session['runtimeId']} with the bind's generation",
           actual=json.dumps(unbind.to_json(), default=str))
    gone = await refuses_connection("127.0.0.1", b.port)
    if not gone:
        ans = await listener(b, "/tools/list", {})
        expect(ans.status in (401, 404, 410), expected="the closed lease's listener serves nothing",
               actual=f"tools/list after close → {ans}")


@case("TT-022")
async def test_close_of_unknown_lease_is_ok(world: Any) -> None:
    """fails when: lease.close of an id the runner never saw answers an error."""
    out = await world.cp.command(world.runner_id, "lease.close",
                                 {"leaseId": "0b9f6c2e-6f0a-4c1e-9d3a-5a1f0c7e2b11"})
    expect(out.ok, expected="lease.close of an unknown id → ok", actual=f"{out.status} {out.code}")


@case("TT-023")
async def test_bind_with_another_session_is_forbidden(world: Any) -> None:
    """fails when: lease.bind binds whatever session the command names (no check against the
    lease's session)."""
    b = await bound_lease(world, bind=False)
    other = await owned_session(world, b.channel)
    out = await world.cp.bind_lease(b.lease, session=other)
    expect(not out.ok and out.code == "runner_session_forbidden",
           expected="lease.bind with another session → runner_session_forbidden",
           actual=f"{out.status} {out.code}")
    binds = [e for e in world.hermes.effects.of("bind")
             if e.session_id in (other["runtimeId"], b.session["runtimeId"])]
    expect(not binds, expected="no bind", actual=f"{len(binds)} bind effect(s)")


@case("TT-024")
async def test_failed_plugin_bind_is_bind_failed(world: Any) -> None:
    """fails when: the runner ignores the plugin's bind answer (reports ok for a 500)."""
    b = await bound_lease(world, bind=False)
    world.hermes.bridge.fail_bind = 500
    out = await world.cp.bind_lease(b.lease)
    expect(not out.ok and out.code == "team_tools_bind_failed",
           expected="a bind answered 500 → team_tools_bind_failed",
           actual=f"{out.status} {out.code}")


@case("TT-904", hermes_script="team")
async def test_bind_without_native_tools_is_unavailable(world: Any) -> None:
    """The plugin answers the first bind {ok:true, native_tools:false}: lease.bind must fail
    with team_tools_unavailable.

    fails when: the runner takes any {ok:true} as bound, so tools are announced to a Hermes
    that cannot serve them natively."""
    b = await bound_lease(world, bind=False)
    world.hermes.bridge.native_tools = False
    out = await world.cp.bind_lease(b.lease)
    expect(not out.ok and out.code == "team_tools_unavailable",
           expected="a bind without native_tools:true → team_tools_unavailable",
           actual=outcome_text(out))


@case("TT-909", hermes_script="team")
async def test_stored_id_changed_during_bind_binds_again(world: Any) -> None:
    """Hermes holds the plugin's first bind of a lease (pause point before bridge.bind); while
    it is held, Hermes gives the session a new stored session (a session.info with the new
    stored_session_id, forwarded to the channel, so the runner has read it); once released,
    lease.bind succeeds and the runner binds once more, with the new stored id.

    fails when: the runner binds once and leaves a stored id that changed meanwhile to the next
    5-min re-check, so the plugin serves tools bound to a stored session Hermes left."""

    from ._helpers_process import bound_lease

    b = await bound_lease(world, bind=False)
    rt, old = b.session["runtimeId"], b.session.get("storedId")
    pause = world.hermes.pause_at("before bridge.bind", session_id=rt)
    bind = asyncio.ensure_future(world.cp.bind_lease(b.lease))
    try:
        await pause.reached(timeout=WAIT)
        new = await world.hermes.new_stored_id(rt)
        after = 0
        while True:   # the runner forwarded the new stored id: it has read it
            frame = await b.channel.next_event("session.info", timeout=WAIT, after=after)
            after = b.channel.events.index(frame) + 1
            payload = frame.get("payload") or {}
            if frame.get("session_id") == rt and payload.get("stored_session_id") == new:
                break
    finally:
        pause.release()
    out = await asyncio.wait_for(bind, scaled(WAIT))
    expect(out.ok, expected="lease.bind succeeds", actual=f"{out.status} {out.code}",
           witness=witness(world, rt))
    try:
        binds = await world.hermes.effects.wait_for_count("bind", 2, timeout=WAIT, session_id=rt)
    except TimeoutError:
        binds = world.hermes.effects.of("bind", session_id=rt)
    sent = [e.stored_session_id for e in binds]
    expect(len(sent) >= 2 and sent[0] == old and sent[-1] == new,
           expected=f"a first bind with {old}, then one more with the new stored id {new}",
           actual=f"binds with {sent}", witness=witness(world, rt))
