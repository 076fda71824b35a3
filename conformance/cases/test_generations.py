"""Generation cases (GEN): a new epoch ends everything of the old one, on both sides."""

from __future__ import annotations

from typing import Any

import aiohttp

from conformance.adapter import RunnerUnderTest
from conformance.marks import case
from conformance.verdict import Unjudged, expect
from conformance.witness import lines_of, note_line, witness

from ._helpers_channels import (
    effects_of,
    expect_error,
    expect_no_effect,
    new_session,
    prompt,
    ws_closed,
)
from ._helpers_channels import (
    socket_of as channel_socket_of,
)
from ._helpers_state import (
    WAIT,
    download,
    lease_session,
    mark,
    open_session,
    polls_after,
    prompt_effects,
    socket_closed,
    socket_of,
    until,
    wait_route,
)


async def _new_epoch(world: Any, how: str = "watchdog") -> str:
    old = world.cp.epoch(world.runner_id)
    if how == "watchdog":
        await world.cp.force_watchdog(world.runner_id)
    elif how == "restart":
        await world.cp.restart()
    return str(await world.runner.guard(world.cp.wait_epoch_change(world.runner_id, old, timeout=WAIT + 1),
                                        "a new epoch", WAIT))


async def _status_ok(world: Any) -> Any:
    out = await world.cp.command(world.runner_id, "http", {"method": "GET", "path": "/api/status",
                                                           "search": ""})
    expect(out.ok and isinstance(out.result, dict) and out.result.get("status") == 200,
           expected="GET /api/status relayed (200)", actual=f"{out.status} {out.code} {out.message or ''}",
           witness=witness(world, routes=("poll", "admit", "result"), effects=True))
    return out


async def _expect_socket_closed(world: Any, sock: str | None, ch: Any, after: str) -> None:
    """The Hermes socket ``sock`` of channel ``ch`` closes within :data:`WAIT` (scaled) of
    ``after``; still open then, with the runner running: the case fails (the runner kept the
    old generation's channel: closing a socket takes it milliseconds)."""
    try:
        await socket_closed(world, sock)
    except TimeoutError:
        expect(False, expected=f"Hermes socket {sock} of channel {ch.connection_id} closed within "
                               f"{WAIT:.0f} s (scaled) of {after}",
               actual="still open (no ws.closed effect; the runner still runs)",
               witness=witness(world, ch.connection_id, routes=("poll",), effects=True))


@case("GEN-001")
async def test_new_epoch_closes_the_channels(world: Any) -> None:
    """fails when: channels are closed only at shutdown, not on a new epoch
    (keep-channels-on-new-epoch)."""
    ch, sid = await open_session(world)
    sock = socket_of(world)
    await _new_epoch(world)
    await _expect_socket_closed(world, sock, ch, "the new epoch")


async def _tools_list(url: str, token: str) -> int | None:
    try:
        async with aiohttp.ClientSession() as s, s.post(
                url.rstrip("/") + "/tools/list", data=b"{}", timeout=aiohttp.ClientTimeout(total=5),
                headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"}) as r:
            return r.status
    except (aiohttp.ClientError, OSError, TimeoutError):
        return None


@case("GEN-002")
async def test_new_epoch_disposes_the_leases(world: Any) -> None:
    """fails when: leases are disposed only at shutdown, not on a new epoch
    (keep-leases-on-new-epoch)."""
    ch, sid = await open_session(world)
    lease = await world.cp.create_lease(ch, profile="default", session=lease_session(ch, sid))
    bound = await world.cp.bind_lease(lease, lease_session(ch, sid))
    binding = world.hermes.bridge.bindings.get(sid)
    expect(bound.ok and binding, expected="the lease is bound (the plugin got bridge_url and token)",
           actual=f"{bound.status} {bound.code}",
           witness=witness(world, lease.lease_id, effects=True))
    url, token = str(binding["bridge_url"]), str(binding["token"])
    world.secrets.add("lease token", token)
    before = await _tools_list(url, token)
    expect(before == 200, expected="the listener serves the lease's token", actual=str(before))
    await _new_epoch(world)
    try:
        await until(lambda: _refused(url, token), "the listener refuses the old token")
    except TimeoutError:
        expect(False, expected="after the new epoch the listener no longer serves the old token",
               actual=f"tools/list still answered {await _tools_list(url, token)}",
               witness=witness(world, lease.lease_id, routes=("poll",), effects=True))


async def _refused(url: str, token: str) -> bool:
    return await _tools_list(url, token) != 200


@case("GEN-003")
async def test_server_restart_reset_poll_and_new_commands(world: Any) -> None:
    """fails when: the runner never sends x-runner-reset after the first poll
    (reset-only-first-poll), or it exits on the restart (exits-on-poll-error)."""
    at = mark(world)
    await _new_epoch(world, "restart")
    answered = [ex for ex in polls_after(world, at) if ex.status == 200]
    expect(answered and answered[0].reset, expected="the first poll accepted after the restart "
           "carries x-runner-reset: 1", actual=f"reset={answered[0].reset if answered else None}",
           witness=witness(world, routes=("poll",), effects=True))
    await _status_ok(world)


async def _expire(world: Any, *, poll_delayed: bool) -> str:
    """One watchdog expiry, by one of its two paths, chosen (a jump at a random moment took one
    of them by scheduling): with the runner's poll held, the jump ends that poll (its hold,
    then the dropped state: 409) and the runner reaches the new epoch through a reset poll;
    with its next poll asleep in a 1 s delay fault (before the gates see it), that normal poll
    is answered at once with the new epoch. Returns the new epoch."""
    cp, rid = world.cp, world.runner_id
    old = cp.epoch(rid)
    await world.runner.guard(cp.poll_held(rid, timeout=WAIT + 1), "a held poll", WAIT)
    if poll_delayed:
        cp.faults.delay_next("poll", seconds=1.0)
        at = mark(world)
        cp.clock.advance(cp.timings.poll_hold)   # the held poll ends empty; the next is delayed
        nxt = await world.runner.guard(cp.history.wait_for(
            lambda ex: ex.route == "poll", timeout=WAIT + 1, after_seq=at), "the next poll", WAIT)
        await until(lambda: nxt.fault == "delay", "the next poll in its delay")
        expect(cp.epoch(rid) == old, expected="still online in the old epoch",
               actual=str(cp.epoch(rid)))
    cp.clock.advance(cp.timings.offline_after + cp.timings.watchdog_tick + 1)
    new = await world.runner.guard(cp.wait_epoch_change(rid, old, timeout=WAIT + 1),
                                   "a new epoch after the watchdog", WAIT)
    return str(new)


@case("GEN-004", manual_clock=True)
async def test_watchdog_expiry_reconnects_with_new_epoch(world: Any) -> None:
    """Two watchdog expiries, one by each path (see ``_expire``): a held poll ended 409, then a
    new epoch on a normal poll. After each the runner must hold the new epoch and run the next
    command in it: its admit carries the new epoch and the command succeeds.

    fails when: the runner exits on the 409 that follows a watchdog expiry
    (exits-on-poll-error), or stays locally disconnected after a new epoch arrives on a normal
    poll (every command of the new epoch answered "runner is disconnected")."""
    for n, delayed in enumerate((False, True), 1):
        new = await _expire(world, poll_delayed=delayed)
        expect(world.cp.disconnects(world.runner_id).count("watchdog") == n,
               expected=f"{n} watchdog disconnect(s)",
               actual=str(world.cp.disconnects(world.runner_id)))
        at = mark(world)
        await _status_ok(world)
        admit = await wait_route(world, "admit", after_seq=at)
        expect(admit.request_epoch == new,
               expected=f"the admit after the reconnect carries epoch {new}",
               actual=str(admit.request_epoch),
               witness=witness(world, routes=("poll", "admit"), effects=True))


def _delivery_epochs(world: Any) -> dict[str, str]:
    out: dict[str, str] = {}
    for ex in world.cp.history.entries:
        if ex.route == "poll" and ex.status == 200 and isinstance(ex.response_body, dict):
            for c in ex.response_body.get("commands") or []:
                if isinstance(c, dict) and isinstance(c.get("id"), str):
                    out[c["id"]] = str(ex.response_body.get("epoch"))
    return out


@case("GEN-005")
async def test_every_request_after_an_epoch_change_carries_it(world: Any) -> None:
    """fails when: the epoch header is built once and cached (stale-epoch-header)."""
    epochs = [world.cp.epoch(world.runner_id)]
    await _status_ok(world)
    for how in ("watchdog", "restart"):
        epochs.append(await _new_epoch(world, how))
        await _status_ok(world)
        ch, _ = await open_session(world)
        await world.cp.close_channel(ch)
    delivered = _delivery_epochs(world)
    stale = [ex for ex in world.cp.history.entries
             if ex.route in ("admit", "result") and ex.command_id in delivered
             and ex.request_epoch != delivered[ex.command_id]]
    expect(len(set(delivered.values())) >= 3 and not stale,
           expected="every admit/result carries the epoch of the poll that delivered its command "
                    f"({len(epochs)} epochs)",
           actual=f"{len(stale)} stale: " + "; ".join(
               f"#{ex.seq} {ex.route} {ex.request_epoch} ≠ {delivered[ex.command_id]}" for ex in stale[:3]),
           witness=lines_of(world, stale[:6]))


@case("GEN-006")
async def test_replaced_process_is_fenced(world: Any) -> None:
    """fails when: the replaced process exits on its 409s (exits-on-poll-error), or keeps its
    channels (keep-channels-on-new-epoch)."""
    ch, sid = await open_session(world)
    sock = socket_of(world)
    old_instance = next(ex.instance for ex in reversed(world.cp.history.entries) if ex.instance)
    old_epoch = world.cp.epoch(world.runner_id)
    second = RunnerUnderTest(world.runner.command, world.config, secrets=world.secrets, name="replacement")
    try:
        await second.start()
        await second.wait_online(world.cp, world.runner_id, WAIT, other_than=old_epoch)
        at = mark(world)
        await ch.closed.wait() if ch.closed.is_set() else await until(
            lambda: ch.closed.is_set(), "the old channel closed on the control plane")
        await _expect_socket_closed(world, sock, ch, "the replacement coming online")
        fenced = await wait_route(world, "poll", lambda ex: ex.instance == old_instance, after_seq=at,
                                  answered=True)
        later = [ex for ex in world.cp.history.entries if ex.instance == old_instance
                 and ex.seq > at and ex.status is not None]
        expect(fenced.status == 409 and all(ex.status == 409 for ex in later),
               expected="every request of the replaced instance gets 409",
               actual=", ".join(f"{ex.route} {ex.status} {ex.code}" for ex in later),
               witness=witness(world, old_instance, routes=("poll",), effects=True))
        expect(world.runner.running, expected="the replaced process does not exit on a 409",
               actual=f"exited {world.runner.returncode}")
        await world.cp.disable_runner(world.runner_id)
        out = await world.cp.command(world.runner_id, "http", download(world))
        expect(out.code == "runner_offline", expected="after the disable: runner_offline",
               actual=f"{out.status} {out.code}",
               witness=witness(world, routes=("poll",), effects=True))
        code = await second.wait(WAIT)
        expect(code == 1, expected="the disabled replacement exits 1", actual=str(code))
        leaks = second.leaks()
        expect(not leaks, expected="no secret in the replacement's output", actual=f"{len(leaks)} leaks",
               witness=[note_line("harness", f"leak: {x}") for x in leaks])
    finally:
        await second.close()


@case("GEN-007", manual_clock=True)
async def test_transport_failure_resets_the_epoch(world: Any) -> None:
    """fails when: channels survive the reset (keep-channels-on-new-epoch), the runner exits on
    a dropped poll (exits-on-poll-error), or it does not reset (reset-only-first-poll)."""
    ch, sid = await open_session(world)
    sock = socket_of(world)
    old = world.cp.epoch(world.runner_id)
    # Two drops: an HTTP client may retry an idempotent GET once on a dropped keep-alive
    # connection (the reference runner's does); the second drop is a transport failure for all.
    world.cp.faults.drop_next("poll", n=2)
    held = await world.runner.guard(world.cp.poll_held(world.runner_id, timeout=WAIT + 1),
                                    "a held poll", WAIT)
    world.cp.clock.advance(world.cp.timings.poll_hold + 0.1)
    await world.runner.guard(world.cp.poll_held(world.runner_id, other_than=held, timeout=WAIT + 1),
                             "a poll after the dropped ones", WAIT)  # the dropped one, or later
    try:
        new = await world.runner.guard(world.cp.wait_epoch_change(world.runner_id, old,
                                                                  timeout=WAIT + 1),
                                       "a new epoch after the dropped poll", WAIT)
    except TimeoutError:
        _expect_reset_after_drop(world)
        raise
    await _expect_socket_closed(world, sock, ch, "the new epoch")
    at = mark(world)
    ch2, sid2 = await open_session(world)
    expect(ch2.connection_id != ch.connection_id and new, expected="a new channel works",
           actual="no new channel")
    closes = world.hermes.effects.count("ws.closed", socket_id=sock)
    closed_posts = [ex for ex in world.cp.history.entries if ex.route == "event"
                    and ex.connection_id == ch.connection_id and isinstance(ex.request_body, dict)
                    and ex.request_body.get("closed") is True]
    expect(closes == 1 and len(closed_posts) <= 1 and world.hermes.effects.count(
               "ws.closed", after_seq=at, socket_id=sock) == 0,
           expected="the obsolete gateway closed once",
           actual=f"{closes} ws.closed, {len(closed_posts)} closed events",
           witness=witness(world, ch.connection_id, routes=("poll",), effects=True))


def _expect_reset_after_drop(world: Any) -> None:
    """After the wait for a new epoch ran out: a poll received after the last dropped one
    without x-runner-reset is why (the control plane holds it in the old epoch) — fail with
    it; else return. (Two drops: a client's own retry of the first is the second.)"""
    polls = [ex for ex in world.cp.history.entries
             if ex.route == "poll" and ex.runner_id == world.runner_id]
    drops = [ex.seq for ex in polls if ex.fault == "drop"]
    plain = [ex for ex in polls if drops and ex.seq > drops[-1] and ex.fault is None
             and not ex.reset]
    expect(not plain, expected="the next poll after the dropped poll "
                               f"#{drops[-1] if drops else '?'} carries x-runner-reset: 1 (a "
                               "transport failure resets, §2.8)",
           actual=f"poll #{plain[0].seq if plain else '?'} without reset (status "
                  f"{plain[0].status if plain else '?'}); the epoch stays the old one",
           witness=witness(world, routes=("poll",), effects=True))


@case("GEN-008")
async def test_disable_exits_1_without_retry(world: Any) -> None:
    """fails when: the runner retries after runner_unauthorized (retry-after-unauthorized)."""
    await world.cp.disable_runner(world.runner_id)
    try:
        code: int | None = await world.runner.wait(WAIT)
    except TimeoutError:
        code = None   # judged below: a retry is the evidence, not the exit wait running out
    refused = [ex for ex in world.cp.history.entries if ex.code == "runner_unauthorized"]
    after = [ex for ex in world.cp.history.entries
             if ex.route == "poll" and refused and ex.seq > refused[0].seq]
    expect(not after, expected="no poll after the first runner_unauthorized (exit 1 instead)",
           actual=f"{len(after)} more poll(s) after #{refused[0].seq if refused else '?'}; "
                  + (f"still running {WAIT:.0f} s (scaled) after the disable" if code is None
                     else f"exit {code}"),
           witness=witness(world, routes=("poll",), effects=True))
    if code is None:
        raise Unjudged("timeout", f"the runner still runs {WAIT:.0f} s (scaled) after the disable "
                                  f"and did not poll again ({len(refused)} request(s) refused "
                                  "runner_unauthorized): too slow to judge its exit")
    expect(refused, expected="a request answered 403 runner_unauthorized", actual="none",
           witness=witness(world, routes=("poll",), effects=True))
    expect(code == 1, expected="exit code 1 after runner_unauthorized", actual=str(code),
           witness=witness(world, routes=("poll",), effects=True))


@case("GEN-009")
async def test_rpc_for_old_epoch_channel_is_refused(world: Any) -> None:
    """fails when: channels survive a new epoch (keep-channels-on-new-epoch): the old session is
    still owned and a prompt for it runs."""
    ch, sid = await open_session(world)
    sock = socket_of(world)
    await _new_epoch(world)
    await _expect_socket_closed(world, sock, ch, "the new epoch (the old epoch's channel is gone)")
    at = mark(world)
    again = await world.cp.open_channel(world.runner_id, profile="default",
                                        connection_id=ch.connection_id, check=False)
    if again.open_outcome is None or again.open_outcome.ok:
        out = await world.cp.rpc(again, "prompt.submit", {"session_id": sid, "text": "old epoch"})
        expect(not out.ok, expected="the rpc for the old epoch's session is refused",
               actual=f"{out.status} {out.code} {out.result}",
               witness=witness(world, ch.connection_id, effects=True))
    expect(not prompt_effects(world, sid) and not world.hermes.effects.of(
               "prompt.accepted", after_seq=at),
           expected="no effect on the old session", actual=f"{len(prompt_effects(world, sid))} prompts",
           witness=witness(world, ch.connection_id, effects=True))


async def _fail_one_poll(world: Any) -> Any:
    """One poll answered 500 (a local disconnect); the reset poll that follows."""
    cp = world.cp
    mark = cp.history.last_seq
    cp.faults.fail_next("poll", n=1, status=500, code="internal_error")
    return await world.runner.guard(cp.history.wait_for(
        lambda ex: ex.route == "poll" and ex.reset and ex.status == 200 and ex.answered,
        timeout=WAIT + 6, after_seq=mark), "a reset poll after the failed poll", WAIT + 5)


@case("GEN-901")
async def test_local_disconnect_interrupts_running_sessions(world: Any) -> None:
    """A turn runs (HANGTEST); one poll fails; the local disconnect closes the channel and
    sends session.interrupt to its running session first.

    fails when: a local disconnect closes the Hermes sockets without interrupting the turns
    they carry (the agent keeps working for nobody)."""
    ch = await world.cp.open_channel(world.runner_id)
    sid = await new_session(world, ch)
    sock = await channel_socket_of(world, sid)
    await prompt(world, ch, sid, "HANGTEST")
    await world.hermes.effects.wait_for("prompt.accepted", timeout=WAIT, session_id=sid)
    await _fail_one_poll(world)
    closed = await ws_closed(world, sock)
    interrupts = effects_of(world, "session.interrupted", session_id=sid)
    expect(interrupts and (closed is None or interrupts[0].seq < closed.seq),
           expected=f"session.interrupt for {sid} before its socket closes",
           actual=f"interrupts {[e.seq for e in interrupts]}, ws.closed "
                  f"{closed.seq if closed else None}", witness=witness(world, sid, "ws.closed"))


@case("GEN-902")
async def test_local_disconnect_tombstones_channel_ids(world: Any) -> None:
    """A channel is open; one poll fails; after the reset poll, a gateway.open of the closed
    channel's id fails and connects no Hermes socket.

    fails when: the local disconnect forgets the ids it closed, so a late (or replayed)
    gateway.open revives a channel of the old generation."""
    ch = await world.cp.open_channel(world.runner_id)
    sid = await new_session(world, ch)
    sock = await channel_socket_of(world, sid)
    await _fail_one_poll(world)
    await ws_closed(world, sock)
    mark = world.hermes.effects.entries[-1].seq
    again = await world.cp.open_channel(world.runner_id, connection_id=ch.connection_id,
                                        check=False)
    expect_error(world, again.open_outcome, what="gateway.open of an id the local disconnect "
                 "closed", needles=[ch.connection_id])
    expect_no_effect(world, "ws.connected", after_seq=mark, what="a refused re-open",
                     needles=[ch.connection_id])
