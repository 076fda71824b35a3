"""CAN — cancel races of admits: a permission or authorization change while an admit is
pending or a command is queued (rows: conformance/rows/cancel.py)."""

from __future__ import annotations

import uuid
from typing import Any

from conformance.marks import case
from conformance.verdict import expect

from ._helpers_channels import (
    WAIT,
    expect_error,
    expect_no_effect,
    new_session,
)


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
