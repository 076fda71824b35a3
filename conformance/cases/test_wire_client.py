"""WIR — wire basics, the machine-API client (§2.1, §8.2): no redirects followed, errors read by
their code, a gateway WebSocket on a connection of its own (rows: conformance/rows/wire.py).

A :class:`~._helpers_canned.CannedTap` (the header tap of ``_helpers_wire`` that can answer one
request itself) sits between the runner and the control plane and answers the runner's next poll with a canned
response: a redirect to a second tap (a trap that records whoever follows), or an error whose
text and status disagree with its code.
"""

from __future__ import annotations

import json
from typing import Any

from conformance.marks import case
from conformance.verdict import expect
from conformance.witness import lines_of, output_lines, witness

from ._helpers_canned import CannedTap, behind_canned, reset_poll_after_canned
from ._helpers_state import download
from ._helpers_wire import HeaderTap


@case("WIR-903", start_runner=False)
async def test_redirects_are_not_followed(world: Any) -> None:
    """The runner's next poll is answered 307 with a Location on a second tap (the trap); the
    runner must not request the Location, and treats the answer as a failed poll: its next poll
    is a reset poll.

    fails when: the HTTP client follows redirects (a hostile or misconfigured proxy can then
    point the runner, with its token, at any server)."""
    from aiohttp import web

    secrets_, token = world.secrets, world.registered.token
    async with CannedTap(world.cp.url, token=token, secrets=secrets_) as tap, \
            HeaderTap(world.cp.url, token=token, secrets=secrets_) as trap:
        await behind_canned(world, tap)
        tap.canned["poll"] = lambda request: web.Response(
            status=307, headers={"Location": trap.url + request.path_qs})
        reset = await reset_poll_after_canned(world, tap)
        followed = [path for path, _ in trap.requests]
        expect(not followed, expected="the redirect's Location never requested",
               actual=followed[:3])
        expect(reset is not None, expected="a reset poll after the redirected poll",
               actual="no reset poll", witness=witness(world, last=6))


@case("WIR-904", start_runner=False)
async def test_errors_are_read_by_code(world: Any) -> None:
    """The runner's next poll is answered 403 {"error": "runner_unauthorized: …",
    "code": "runner_instance_changed"}: the code says "reconnect", the status and the text say
    "unauthorized". The runner must reconnect (a reset poll) and keep running.

    fails when: the runner matches the error text (or takes every 403 as unauthorized) and exits
    on an answer whose code is not runner_unauthorized."""
    from aiohttp import web

    body = json.dumps({"error": "runner_unauthorized: this runner token was revoked",
                       "code": "runner_instance_changed"}).encode()
    async with CannedTap(world.cp.url, token=world.registered.token,
                         secrets=world.secrets) as tap:
        await behind_canned(world, tap)
        tap.canned["poll"] = lambda request: web.Response(
            status=403, body=body, content_type="application/json")
        reset = await reset_poll_after_canned(world, tap)
        expect(reset is not None and world.runner.running,
               expected="a reset poll after 403 runner_instance_changed, the runner running",
               actual="exited" if not world.runner.running else "no reset poll",
               witness=output_lines(world.runner.stderr_text(), last=3))


@case("WIR-907")
async def test_gateway_websocket_opens_on_a_connection_of_its_own(world: Any) -> None:
    """fails when: the Hermes client keeps HTTP connections alive and upgrades one of them to the
    WebSocket (keep-alive-websocket) — real Hermes' server may cut that socket 5 s later."""
    payload = download(world)
    out = await world.cp.command(world.runner_id, "http", payload)
    expect(out.ok, expected="the download answered", actual=f"{out.status} {out.code}")
    channels = [await world.cp.open_channel(world.runner_id, profile="default") for _ in range(2)]
    opened = world.hermes.effects.of("ws.connected")
    reused = [e for e in opened if e.detail.get("reused")]
    expect(len(opened) >= 2 and not reused,
           expected="every gateway WebSocket upgraded on a new connection",
           actual=f"{len(reused)} of {len(opened)} WebSockets upgraded on a connection that had "
                  "carried an HTTP request",
           witness=lines_of(world, reused))
    for ch in channels:
        await world.cp.close_channel(ch)
