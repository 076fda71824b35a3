"""Spec-coverage cases for the machine-API client (§2.1).

A :class:`CannedTap` (the header tap of ``_helpers_wire`` that can answer one request itself)
sits between the runner and the control plane and answers the runner's next poll with a canned
response: a redirect to a second tap (a trap that records whoever follows), or an error whose
text and status disagree with its code.
"""

from __future__ import annotations

import contextlib
import inspect
import json
from collections.abc import Callable
from typing import Any

from conformance.adapter import RunnerExited
from conformance.marks import case
from conformance.verdict import expect

from ._helpers_state import download, reads, until
from ._helpers_wire import HeaderTap, excerpt

WAIT = 10.0


class CannedTap(HeaderTap):
    """A :class:`HeaderTap` that answers the next request of a route with ``canned[route]``
    (a function of the request giving an aiohttp response, or awaitable one) instead of
    forwarding it; ``then[route]`` (a list) is used up after it, one per request."""

    def __init__(self, upstream: str, *, token: str, secrets: Any) -> None:
        super().__init__(upstream, token=token, secrets=secrets)
        self.canned: dict[str, Callable[[Any], Any]] = {}
        self.then: dict[str, list[Callable[[Any], Any]]] = {}
        self.answered: list[str] = []

    async def _forward(self, request: Any) -> Any:
        route = self.route_of(request.path)
        answer = self.canned.pop(route, None)
        if answer is None and self.then.get(route):
            answer = self.then[route].pop(0)
        if answer is None:
            return await super()._forward(request)
        self._record(request.path_qs, request.headers)
        self.answered.append(route)
        out = answer(request)
        return await out if inspect.isawaitable(out) else out

    async def __aenter__(self) -> CannedTap:
        await super().__aenter__()
        return self

    async def forward(self, request: Any) -> Any:
        return await super()._forward(request)


async def _behind(world: Any, tap: HeaderTap) -> None:
    world.runner.config["serverURL"] = tap.url
    world.runner.write_config()
    await world.start_runner()


async def _reset_poll_after_canned(world: Any, tap: CannedTap) -> Any:
    await world.runner.guard(until(lambda: tap.answered, "the canned poll answer", WAIT),
                             "the canned poll answer", WAIT + 1)
    mark = world.cp.history.last_seq
    try:
        return await world.runner.guard(world.cp.history.wait_for(
            lambda ex: ex.route == "poll" and ex.reset, timeout=WAIT + 1, after_seq=mark),
            "a reset poll", WAIT)
    except (TimeoutError, RunnerExited):
        return None


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
        await _behind(world, tap)
        tap.canned["poll"] = lambda request: web.Response(
            status=307, headers={"Location": trap.url + request.path_qs})
        reset = await _reset_poll_after_canned(world, tap)
        followed = [path for path, _ in trap.requests]
        expect(not followed, expected="the redirect's Location never requested",
               actual=followed[:3])
        expect(reset is not None, expected="a reset poll after the redirected poll",
               actual="no reset poll", witness=excerpt(world, limit=6))


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
        await _behind(world, tap)
        tap.canned["poll"] = lambda request: web.Response(
            status=403, body=body, content_type="application/json")
        reset = await _reset_poll_after_canned(world, tap)
        expect(reset is not None and world.runner.running,
               expected="a reset poll after 403 runner_instance_changed, the runner running",
               actual="exited" if not world.runner.running else "no reset poll",
               witness=world.runner.stderr_text().splitlines()[-3:])


@case("WIR-905", start_runner=False)
async def test_command_without_a_numeric_deadline_is_not_run(world: Any) -> None:
    """A download is queued on the control plane (so its admit would be granted); the tap
    answers the runner's next poll itself with that command, once without expiresAt and once
    with expiresAt "soon" (two ids). Neither may reach Hermes.

    fails when: the runner executes a command whose deadline it cannot read (treats a missing
    or non-numeric expiresAt as "no deadline")."""
    from aiohttp import web

    async with CannedTap(world.cp.url, token=world.registered.token,
                         secrets=world.secrets) as tap:
        await _behind(world, tap)
        payloads = [download(world, "no-deadline.txt"), download(world, "text-deadline.txt")]
        tap.canned["poll"] = lambda request: web.Response(status=503)   # park the next poll
        await world.runner.guard(until(lambda: tap.answered, "the parked poll", WAIT),
                                 "the parked poll", WAIT + 1)
        handles = [await world.cp.submit(world.runner_id, "http", p) for p in payloads]
        wires = [dict(h.wire) for h in handles]
        wires[0].pop("expiresAt")
        wires[1]["expiresAt"] = "soon"
        body = json.dumps({"epoch": None, "commands": wires}).encode()

        def answer(request: Any) -> Any:
            epoch = world.cp.epoch(world.runner_id)
            return web.Response(status=200, content_type="application/json",
                                body=body.replace(b'"epoch": null', json.dumps(
                                    {"epoch": epoch})[1:-1].encode()))
        ids = {h.id for h in handles}

        async def park(request: Any) -> Any:   # the real delivery waits for the runner's answers
            def answered() -> bool:
                return ids <= {ex.command_id for ex in world.cp.history.entries
                               if ex.route == "result" and ex.answered}
            with contextlib.suppress(TimeoutError):
                await until(answered, "results for the canned commands", WAIT)
            return await tap.forward(request)
        tap.canned["poll"] = answer
        tap.then["poll"] = [park]
        await world.runner.guard(until(lambda: len(tap.answered) >= 2, "the canned commands",
                                       WAIT + 5), "the canned commands", WAIT + 6)
        for h in handles:
            await h.wait(WAIT + 20)
    ran = [p["search"] for p in payloads if reads(world, p)]
    expect(not ran, expected="no Hermes read for a command without a numeric expiresAt",
           actual=ran, witness=excerpt(world, *(h.id for h in handles)))


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
        await _behind(world, tap)
        cid = str(uuid.uuid4())
        epoch = world.cp.epoch(world.runner_id)
        command = {"id": cid, "kind": "http", "payload": {"method": "GET", "path": "/api/status"},
                   "expiresAt": 2**52, "pad": "x" * (41 * 1024 * 1024)}
        body = json.dumps({"epoch": epoch, "commands": [command]}).encode()
        tap.canned["poll"] = lambda request: web.Response(
            status=200, body=body, content_type="application/json")
        reset = await _reset_poll_after_canned(world, tap)
    admits = [ex for ex in world.cp.history.entries if ex.route == "admit" and ex.command_id == cid]
    expect(not admits, expected="no admit for a command in a 41 MiB poll answer",
           actual=f"{len(admits)} admit(s)")
    expect(reset is not None, expected="a reset poll after the oversized answer",
           actual="no reset poll", witness=excerpt(world, limit=6))


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
           witness=[f"ws.connected #{e.seq} connection {e.cause.connection if e.cause else '?'}"
                    for e in reused])
    for ch in channels:
        await world.cp.close_channel(ch)
