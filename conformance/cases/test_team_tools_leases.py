"""TT — team tools, the lease itself: lease.create's requireProfile, gateway.close disposing the
channel's leases, the lease token's randomness (§3.4, §3.5, §6.3), and the lease re-check of
§6.5 (every 5 min; expiry 30 min after the last renewal; rows: conformance/rows/team_tools.py).

The re-check cases:

The runner runs on the adapter's live clock (``RunnerUnderTest.start(live_clock=True)``): its
wall and monotonic clocks move ahead on ``advance_clock`` without a restart. The control plane
holds polls 0.01 s and keeps the real clock: no server rule takes part (the re-check is local to
the runner, §6.5), and its leases stay valid. How the runner's clock is moved through 5-min
re-checks without timing out a held poll or an in-flight re-bind (either would be the harness's
doing, never the runner's) is :mod:`._helpers_recheck`: jumps of at most 20 s, none once the
next re-check may be due, the window of each re-check taken from the choices §6.5 leaves open.

Not covered here: "a lease not renewed for 30 min MUST be disposed" needs 30 min of the
runner's time without a re-check — one jump, which any runner also sees as a timed-out poll.
Every wait is bounded; the runner is a black box.
"""

from __future__ import annotations

import math
import string
from typing import Any

import aiohttp

from conformance.marks import case
from conformance.verdict import expect
from fake_server import Timings

from ._helpers_channels import WAIT
from ._helpers_hermes_interop import poll_until
from ._helpers_outcomes import OUTCOME_TIMEOUT, brief_outcome, effects_since, last_seq
from ._helpers_process import Answer, Bound, bound_lease, listener, refuses_connection
from ._helpers_recheck import TTL, RecheckClock

STEP_PAST = 10.0     # TT-906 looks this long past the expiry lease.create and the first bind set
SLACK_MS = 1000      # ms rounding and the two processes' clock reads
FAST_POLLS = Timings(poll_hold=0.01, redelivery=1.0)
OPTS: dict[str, Any] = {"hermes_script": "team", "start_runner": False, "timings": FAST_POLLS}


async def _start_live(world: Any) -> RecheckClock:
    await world.runner.start(live_clock=True)
    await world.runner.wait_online(world.cp, world.runner_id, world.online_timeout)
    return RecheckClock(world)


async def _bound(world: Any, clock: RecheckClock) -> Bound:
    b = await bound_lease(world)
    clock.opened()
    return b


def _binds(world: Any, b: Bound) -> list[Any]:
    return world.hermes.effects.of("bind", session_id=b.session["runtimeId"])


async def _serves(b: Bound) -> Answer | None:
    """The listener's tools/list answer, or None when nothing accepts a connection or the
    listener drops it before answering (a lease disposed while the request was on its way)."""
    if await refuses_connection("127.0.0.1", b.port):
        return None
    try:
        return await listener(b, "/tools/list", {})
    except (OSError, aiohttp.ClientConnectionError):
        return None


def _disposed(ans: Answer | None) -> bool:
    """Disposed (§6.5, §6.1 step 4): the listener is closed, or answers 410 team_tools_expired
    (either is what a disposed lease shows; which one is the runner's choice)."""
    return ans is None or (ans.status == 410 and ans.code == "team_tools_expired")


def _text(ans: Answer | None) -> str:
    return "connection refused" if ans is None else str(ans)


@case("TT-905", **OPTS)
async def test_recheck_rebinds_with_a_new_expiry(world: Any) -> None:
    """A bound lease; the runner's clock moves past its first re-check: the re-check passes
    (channel open, session owned, same epoch), so a second bind reaches the plugin, its
    expires_at 30 min after the re-check (bracketed by the earliest moment the re-check could
    run and the runner's clock once the bind is seen).

    fails when: the runner never re-checks (no timer), re-checks without binding again, or
    re-binds with the lease's old expires_at."""
    clock = await _start_live(world)
    b = await _bound(world, clock)
    first = _binds(world, b)[-1].detail["expires_at"]
    binds = await clock.next_bind(b.session["runtimeId"], 2)
    new = binds[-1].detail["expires_at"]
    low = int((clock.floor + TTL) * 1000) - SLACK_MS
    high = int((clock.hi + TTL) * 1000) + SLACK_MS
    expect(low <= new <= high and new > first,
           expected=f"a re-bind with expires_at in [{low}, {high}] (30 min after the re-check), "
                    f"later than the first bind's {first}",
           actual=f"expires_at {new}")


@case("TT-906", **OPTS)
async def test_recheck_moves_the_expiry(world: Any) -> None:
    """A bound lease, re-checked at 5, 10, … 25 min (each re-bind awaited); then the clock
    moves to 30 min 10 s after the first bind — past the expiry lease.create and the first bind
    set, about 5 min after the last re-check. The lease must still serve tools/list.

    fails when: a passing re-check leaves the expiry where lease.create (or the first bind) put
    it, so the lease dies 30 min after creation however often it was re-checked."""
    clock = await _start_live(world)
    b = await _bound(world, clock)
    first_expiry = clock.hi + TTL          # the latest expiry lease.create or the bind set
    for k in range(1, 6):   # re-checks at 5, 10, … 25 min (each re-bind awaited before more)
        await clock.next_bind(b.session["runtimeId"], k + 1)
    await clock.reach(first_expiry + STEP_PAST)
    ans = await _serves(b)
    expect(ans is not None and ans.status == 200,
           expected="tools/list 200: each re-check moved the expiry to 30 min from then",
           actual=_text(ans))


@case("TT-907", **OPTS)
async def test_failed_rebind_disposes(world: Any) -> None:
    """A bound lease; the plugin then refuses every bind (409) and the clock moves past the
    first re-check: its re-bind fails (or the runner disposes the lease before re-binding), so
    the lease must be disposed — its listener closes or answers 410 team_tools_expired.

    fails when: the runner ignores a failed re-bind (or retries it forever) and keeps serving
    a lease Hermes no longer has bound."""
    clock = await _start_live(world)
    b = await _bound(world, clock)
    world.hermes.bridge.fail_bind = 409
    await clock.move_to(clock.latest)

    async def refused_or_unbound() -> bool:  # a runner may dispose before it re-binds
        return bool(world.hermes.effects.of("bind.rejected") or world.hermes.effects.of("unbind"))

    await poll_until(refused_or_unbound, clock.bound(), "the re-bind refused (bind.rejected) "
                     "or the lease unbound")
    last: list[Answer | None] = []

    async def disposed() -> bool:
        last[:] = [await _serves(b)]
        return _disposed(last[0])

    await poll_until(disposed, WAIT, "the lease disposed after its re-bind failed "
                     "(listener closed or 410 team_tools_expired)")
    expect(_disposed(last[0]), expected="a disposed lease", actual=_text(last[0]))


@case("TT-908", **OPTS)
async def test_session_info_updates_the_leases_stored_id(world: Any) -> None:
    """A bound lease; Hermes then gives its session a new stored session (a session.info with
    the new stored_session_id); the clock moves past the first re-check: the re-bind must carry
    the new stored id (the bind body is where a lease's stored id shows).

    fails when: the runner keeps the stored id the lease was created (or first bound) with and
    ignores later session.info frames, so the plugin binds the tools to a stale stored session."""
    clock = await _start_live(world)
    b = await _bound(world, clock)
    old = b.session["storedId"]
    new = await world.hermes.new_stored_id(b.session["runtimeId"])
    binds = await clock.next_bind(b.session["runtimeId"], 2)
    sent = binds[-1].stored_session_id
    expect(sent == new, expected=f"the re-bind carries the new stored id {new}",
           actual=f"stored_session_id {sent}" + (" (the old one)" if sent == old else ""))


@case("TT-901", hermes_script="team")
async def test_lease_create_outside_allowed_profiles_is_refused(world: Any) -> None:
    """lease.create naming a profile outside allowedProfiles ("research") for an owned session
    must be refused (runner_profile_forbidden; runner_session_forbidden accepted, since the
    session is not owned under that profile either) and start no listener, no bind.

    fails when: the runner skips requireProfile for lease.create and the session-under-profile
    check, creating a lease (listener) for a profile it may not serve."""
    ch = await world.cp.open_channel(world.runner_id, profile="default")
    created = await world.cp.rpc(ch, "session.create", {"profile": "default", "title": "tt"})
    expect(created.ok, expected="session.create ok", actual=brief_outcome(created))
    session = {"runtimeId": created.result["session_id"],
               "storedId": created.result["stored_session_id"]}
    since = last_seq(world)
    lease = await world.cp.create_lease(ch, profile="research", session=session, check=False)
    out = lease.create_outcome
    expect(out is not None and not out.ok
           and out.code in ("runner_profile_forbidden", "runner_session_forbidden"),
           expected="lease.create for profile research refused runner_profile_forbidden",
           actual=brief_outcome(out) if out else "no outcome")
    expect(not effects_since(world, since), expected="no Hermes effect (no bind)",
           actual=effects_since(world, since))


@case("TT-902", hermes_script="team")
async def test_gateway_close_disposes_the_channels_leases(world: Any) -> None:
    """A bound lease lives on a channel; gateway.close of that channel must dispose it: the
    plugin gets the unbind of the lease's generation, and a later lease.bind of it is refused.

    fails when: gateway.close closes the Hermes socket but leaves the channel's leases alive
    (no unbind, the listener keeps serving, lease.bind still works)."""
    b = await bound_lease(world)
    sid = b.session["runtimeId"]
    closed = await world.cp.close_channel(b.channel)
    expect(closed.ok, expected="gateway.close answered {ok:true}", actual=brief_outcome(closed))
    unbind = await world.hermes.effects.wait_for("unbind", timeout=OUTCOME_TIMEOUT, session_id=sid)
    expect(unbind.detail.get("generation") == b.binding["generation"],
           expected="the unbind of the bound lease's generation",
           actual=str(unbind.detail.get("generation")))


_ALPHABETS = (string.digits + "abcdef", string.digits + "abcdefABCDEF",
              string.ascii_letters + string.digits + "-_", string.ascii_letters + string.digits
              + "+/=", "".join(chr(c) for c in range(33, 127)))


def _bits(token: str) -> float:
    """An upper bound of the randomness a token text can carry: its length times log2 of the
    smallest usual alphabet (hex, base64url, base64, printable ASCII) that holds it."""
    for alphabet in _ALPHABETS:
        if set(token) <= set(alphabet):
            return len(token) * math.log2(len(set(alphabet)))
    return len(token) * 8.0


@case("TT-903", hermes_script="team")
async def test_lease_token_holds_32_bytes(world: Any) -> None:
    """Two bound leases: each token text can carry at least 256 bits (hex ≥ 64 chars,
    base64url ≥ 43, …) and the two differ. The generator's quality cannot be seen from outside;
    the length bound and the difference are what a black box shows.

    fails when: the runner mints short lease tokens (8 random bytes, a counter, a uuid4 hex of
    122 bits) or reuses one token for every lease."""
    a = await bound_lease(world)
    b = await bound_lease(world)
    weak = [f"{len(t)} chars, ≤{_bits(t):.0f} bits" for t in (a.token, b.token) if _bits(t) < 256]
    expect(not weak, expected="lease tokens of at least 32 bytes (256 bits)", actual=weak)
    expect(a.token != b.token, expected="two leases, two tokens", actual="the same token")
