"""World events of the permission, generation and cancel families, as async actions on a rig.

Rules:
- Like :mod:`.actions`: one action, one world event; stopping at a step uses the control plane's
  targeted faults (a held admit) or a bounded wait for a record, never a sleep.
- A race is staged so both orders are legal for a correct runner and only a bug leaves a fact
  the checker can prove (an effect or an event on a closed channel or lease, an effect without
  a granted admit): the action itself asserts nothing.
- A probe (``across_epoch``) makes Hermes speak on a channel, or the plugin call a lease, that the
  runner should have closed; it runs only when the socket is still open (no unbind came) after a
  bounded wait for the close.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import aiohttp

from . import actions
from .actions import WAIT, bounded
from .rig import Rig, within

ACCOUNT = "alice"
#: a race holds a request this long on the manual server clock; :func:`release` moves the clock
#: past it (``faults.clear`` disarms faults, it does not wake a held request)
RACE_HOLD = 2.0
#: how long a probe waits for a channel's Hermes socket to close after a new epoch before it
#: makes Hermes speak on it (the verdict is a recorded event, never this bound)
CLOSE_BOUND = 3.0


def release(rig: Rig) -> None:
    rig.world.cp.faults.clear()
    assert rig.world.clock is not None
    rig.world.clock.advance(RACE_HOLD)


# -- permission ---------------------------------------------------------------------------------
async def http_for(rig: Rig, profile: str, account: str | None) -> Any:
    w = rig.world
    payload = actions.http_payload(rig)
    payload["search"] = payload["search"].replace("profile=default", f"profile={profile}")
    h = await w.cp.submit(w.runner_id, "http", payload, account=account,
                          command_id=actions.new_id())
    return await actions.settle_handle(rig, h)


async def set_source_profiles(rig: Rig, allowed: list[str]) -> None:
    """Restrict the runner's source to ``allowed`` (and note the set: the store records no
    lifecycle entry for a source change)."""
    w = rig.world
    record = await w.cp.store.get_runner(w.runner_id)
    assert record is not None
    src = await w.cp.store.get_source(record.source_node_id)
    name, paired = (src.name, src.paired) if src is not None else (record.source_node_id, False)
    await w.cp.add_source(record.source_node_id, name, paired=paired, allowed_profiles=allowed)
    rig.note("profiles", reason="source", profiles=frozenset(allowed), raw="add_source")


async def revoke_while_admit_pending(rig: Rig) -> Any:
    """Upstream #13/#19: the account's authorization changes while the admit of its queued
    command is held; the admit must be refused and Hermes never see the command."""
    w = rig.world
    cid = actions.new_id()
    acc = await w.cp.store.get_account(ACCOUNT)
    profile = sorted(acc.allowed_profiles)[0] if acc is not None and acc.allowed_profiles else "x"
    payload = actions.http_payload(rig)
    payload["search"] = payload["search"].replace("profile=default", f"profile={profile}")
    w.cp.faults.delay_next("admit", seconds=RACE_HOLD, target=cid)
    h = await w.cp.submit(w.runner_id, "http", payload, account=ACCOUNT, command_id=cid)
    if h.future.done():  # refused at once (the profile is no longer allowed): nothing to race
        w.cp.faults.clear()
        return await h.wait(WAIT)
    await within(f"the held admit of {cid}", w.cp.history.wait_for(
        lambda ex: ex.route == "admit" and ex.command_id == cid, timeout=None))
    await w.cp.bump_authorization(ACCOUNT)
    release(rig)
    return await actions.settle_handle(rig, h)


# -- generations --------------------------------------------------------------------------------
TOOL = {"id": "probe_tool", "name": "probe", "description": "a probe",
        "inputSchema": {"type": "object"}}


async def _listener(url: str, token: str, path: str, body: dict[str, Any]) -> Any:
    """One POST to a lease's loopback listener (None when nothing listens any more)."""
    try:
        async with aiohttp.ClientSession() as http, http.post(
                url.rstrip("/") + path, json=body, headers={"Authorization": f"Bearer {token}"},
                timeout=aiohttp.ClientTimeout(total=WAIT)) as r:
            return await r.json(content_type=None) if r.status == 200 else None
    except (TimeoutError, aiohttp.ClientError, OSError, ValueError):
        return None


async def across_epoch(rig: Rig, *, channel: bool = True, lease: bool = True) -> None:
    """Upstream #17 / GEN-001 / GEN-002: a channel with a live session (and a bound lease on
    it), then one new epoch (watchdog). The runner must close the channel and dispose the lease.
    If the channel's Hermes socket is still open after ``CLOSE_BOUND``, Hermes sends a frame on
    the session; if no unbind came, the plugin calls the lease's tool: a runner that kept either
    forwards the frame or relays the call under the new epoch (INV-8)."""
    w = rig.world
    ch = await actions.channel(rig)
    ids = await actions.session_ids(rig, ch)
    if ids[0] is None:
        return
    created = await within(f"Hermes' session.created of {ids[0]}", w.hermes.effects.wait_for(
        "session.created", timeout=WAIT + 1, session_id=ids[0]))
    binding: dict[str, Any] = {}
    if lease:
        ls = await bounded(w.cp.create_lease(
            ch, profile="default", session={"runtimeId": ids[0], "storedId": ids[1]},
            tools=[dict(TOOL)], handlers={"*": lambda _tool, _args: {"ok": True}}, check=False))
        if ls.create_outcome is not None and ls.create_outcome.ok and (
                await bounded(w.cp.bind_lease(ls))).ok:
            binding = dict(w.hermes.bridge.bindings.get(ids[0]) or {})
            if isinstance(binding.get("token"), str):
                w.secrets.add("lease token", binding["token"])
    mark = w.hermes.effects.entries[-1].seq if w.hermes.effects.entries else 0
    await actions.new_epoch(rig, lambda: w.cp.force_watchdog(w.runner_id))
    waits = []
    if channel:
        waits.append(_probe_channel(rig, ch, ids[0], created.socket_id))
    if binding:
        waits.append(_probe_lease(rig, binding, mark))
    await asyncio.gather(*waits)


async def _probe_channel(rig: Rig, ch: Any, sid: str, sock: str | None) -> None:
    w = rig.world
    try:
        await w.hermes.effects.wait_for("ws.closed", timeout=CLOSE_BOUND, socket_id=sock)
        return
    except TimeoutError:
        pass
    live = w.hermes.core.live.get(sid)
    if live is None:
        return
    mark = w.cp.history.last_seq
    await w.hermes.core.emit(live, "message.delta", {"text": "after the epoch"})
    with contextlib.suppress(TimeoutError, asyncio.TimeoutError):
        await w.cp.history.wait_for(lambda ex: ex.seq > mark and ex.route == "event"
                                    and ex.connection_id == ch.connection_id, timeout=WAIT)


async def _probe_lease(rig: Rig, binding: dict[str, Any], mark: int) -> None:
    w = rig.world
    url, token = binding.get("bridge_url"), binding.get("token")
    if not (isinstance(url, str) and isinstance(token, str)):
        return
    try:
        await w.hermes.effects.wait_for_count("unbind", 1, timeout=CLOSE_BOUND,
                                              where=lambda e: e.seq > mark)
        return
    except TimeoutError:
        pass
    listing = await _listener(url, token, "/tools/list", {})
    tools = listing.get("tools") if isinstance(listing, dict) else None
    if not isinstance(tools, list) or not tools or not isinstance(tools[0], dict):
        return
    await _listener(url, token, "/tools/call", {"toolId": tools[0].get("id"), "arguments": {},
                                                "callId": actions.new_id()})


# -- cancel races -------------------------------------------------------------------------------
async def lease_on(rig: Rig, ch: Any) -> Any:
    """A created lease on a fresh session of ``ch`` (None when the create failed)."""
    if ch.closed.is_set():
        return None
    ids = await actions.session_ids(rig, ch)
    if ids[0] is None:
        return None
    lease = await bounded(rig.world.cp.create_lease(
        ch, profile="default", session={"runtimeId": ids[0], "storedId": ids[1]}, check=False))
    return lease if lease.create_outcome is not None and lease.create_outcome.ok else None


async def close_overtakes_create(rig: Rig, ch: Any) -> None:
    """Upstream #20 (CAN-005): lease.create and its lease.close delivered together; whichever
    wins, no bind may happen after the close, and a later lease.bind is refused."""
    w = rig.world
    if ch.closed.is_set():
        return
    ids = await actions.session_ids(rig, ch)
    if ids[0] is None:
        return
    lease, payload = actions.lease_payload(rig, ch, ids)
    create = await w.cp.submit(w.runner_id, "lease.create", payload, profile="default",
                               channel=ch, lease=lease)
    close = await w.cp.submit(w.runner_id, "lease.close", {"leaseId": lease.lease_id})
    await actions.settle_handle(rig, create)
    await actions.settle_handle(rig, close)
    await bounded(w.cp.bind_lease(lease))


async def recreate_closed_lease(rig: Rig, lease: Any) -> None:
    """CAN-007: a late lease.create of a closed lease id (a delayed duplicate) must fail and its
    lease never bind again (the runner keeps a tombstone)."""
    w = rig.world
    closed = await w.cp.command(w.runner_id, "lease.close", {"leaseId": lease.lease_id})
    if not closed.ok:
        return
    again = await w.cp.submit(w.runner_id, "lease.create", {
        "leaseId": lease.lease_id, "profile": "default", "workId": lease.lease_id,
        "session": dict(lease.session), "catalog": [], "workspaceMemory": False},
        profile="default", channel=lease.channel, lease=lease)
    await actions.settle_handle(rig, again)
    await bounded(w.cp.bind_lease(lease))


async def reopen_closed_channel(rig: Rig, ch: Any) -> None:
    """CAN-004: a late gateway.open of a closed connection id must not reopen it."""
    w = rig.world
    if not ch.closed.is_set():
        await bounded(w.cp.close_channel(ch))
    await bounded(w.cp.open_channel(w.runner_id, connection_id=ch.connection_id, check=False))


async def close_overtakes_admit(rig: Rig, ch: Any) -> None:
    """A prompt whose admit is held, then its channel closes: the admit is refused and Hermes
    never sees the prompt (a runner that skips or ignores the admit runs it)."""
    w = rig.world
    if ch.closed.is_set():
        return
    sid = await actions.session(rig, ch)
    if sid is None:
        return
    cid = actions.new_id()
    w.cp.faults.delay_next("admit", seconds=RACE_HOLD, target=cid)
    p = await w.cp.submit(w.runner_id, "gateway.rpc", actions.prompt_payload(ch, sid), channel=ch,
                          command_id=cid)
    if p.future.done():  # refused at once (a revoked channel): nothing to race
        w.cp.faults.clear()
        return
    await within(f"the held admit of {cid}", w.cp.history.wait_for(
        lambda ex: ex.route == "admit" and ex.command_id == cid, timeout=None))
    await bounded(w.cp.close_channel(ch))
    release(rig)
    await actions.settle_handle(rig, p)
