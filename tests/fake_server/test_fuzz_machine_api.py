"""Bad input against the machine API of a real ControlPlane over loopback sockets.

At least 1,000 generated requests (routes, methods, headers, bodies) must each get a precise
JSON answer: never a 5xx, every refusal ``{"error": str, "code": str}`` with a known code,
``Cache-Control: no-store`` always, and no token in any response. Afterwards the server must
still work: a fresh instance polls, a queued command is delivered, admitted and its result
accepted. Replay a failure with ``FUZZ_SEED=<seed>`` (the seed is printed).
"""
from __future__ import annotations

import asyncio
import json
import os
import random
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from hypothesis import given, seed, settings
from hypothesis import strategies as st

from conformance.portal import Portal
from fake_server import ControlPlane
from fake_server.timings import Timings
from tests.budget import examples

from .fuzz_requests import Req, requests_for
from .fuzz_server import Server, connect, ensure_lease, legit_headers

#: Every code the machine API may answer with (docs/protocol.md §11, machine-API rows).
KNOWN_CODES = frozenset({
    "invalid_host", "runner_unauthorized", "runner_protocol_mismatch",
    "runner_instance_changed", "runner_instance_retired", "runner_instance_limit",
    "runner_epoch_changed", "method_not_allowed", "runner_payload_limit", "invalid_json",
    "not_found", "invalid_workspace_request", "runner_connection_closed",
    "runner_lease_expired", "idempotency_conflict", "runner_call_limit",
    "artifact_forbidden", "artifact_invalid", "artifact_limit", "artifact_missing",
    "artifact_incomplete", "artifact_digest_mismatch", "compose_desktop_forbidden",
    "execution_grant_revoked", "team_tool_not_found", "bad_request", "request_header_too_large",
})


# -- a ControlPlane on its own loop, behind a conformance Portal ------------------------------
@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    timings = Timings(poll_hold=0.05, redelivery=0.5, watchdog_tick=1.0, offline_after=600.0)
    cp = ControlPlane(timings=timings)

    with Portal("fuzz-control-plane") as portal:
        async def setup() -> Server:
            await cp.start()
            a = await cp.register_runner(name="fuzz-a")
            await cp.add_source("src-b", "node b")
            await cp.add_source("src-c", "node c")
            b = await cp.register_runner(name="fuzz-b", source="src-b")
            c = await cp.register_runner(name="fuzz-c", source="src-c")
            await cp.disable_runner(c.runner_id)
            return Server(cp, portal, a.runner_id, a.token, b.runner_id, b.token, c.runner_id,
                          c.token, secrets=[a.token, b.token, c.token, cp.admin_password])

        srv = portal.run(setup(), timeout=30)
        try:
            yield srv
        finally:
            portal.run(cp.stop(), timeout=30)


# -- the check every answer must pass -------------------------------------------------------
def check_response(srv: Server, req: Req, resp: httpx.Response) -> None:
    sent = resp.request.url.raw_path.decode("ascii")
    where = f"{req.method} {sent} [{req.note}] → {resp.status_code}"
    assert resp.status_code < 500, f"5xx: {where}: {resp.text[:300]}"
    raw = resp.content
    for secret in srv.secrets:
        assert secret.encode() not in raw, f"secret in body: {where}"
        assert all(secret not in v for v in resp.headers.values()), f"secret in headers: {where}"
    if not sent.startswith("/api/runner/v1/"):
        return  # the client normalised the path out of the machine API (e.g. "/x/..")
    assert resp.headers.get("cache-control") == "no-store", f"no Cache-Control: {where}"
    if req.method == "HEAD":
        return
    body = json.loads(raw)
    assert isinstance(body, dict), where
    if not 200 <= resp.status_code < 300:
        assert set(body) == {"error", "code"}, f"bad error body {body!r}: {where}"
        assert isinstance(body["error"], str) and isinstance(body["code"], str), where
        assert body["code"] in KNOWN_CODES, f"unknown code {body['code']!r}: {where}"


# -- the test -------------------------------------------------------------------------------
FUZZ_SEED = int(os.environ.get("FUZZ_SEED") or random.randrange(2**32))


@pytest.mark.slow  # end to end: a seeded fuzz of every machine route over real sockets
def test_machine_api_survives_bad_input(server: Server) -> None:
    print(f"machine-API fuzz seed={FUZZ_SEED} (replay: FUZZ_SEED={FUZZ_SEED})")
    srv = server
    counts: dict[int, int] = {}
    codes: dict[str, int] = {}
    with httpx.Client(base_url=srv.cp.url, timeout=30.0) as client:
        connect(srv, client)

        budget = examples(ci=60)   # 1000 under HYPOTHESIS_PROFILE=thorough

        @seed(FUZZ_SEED)
        @settings(max_examples=budget)
        @given(data=st.data())
        def fuzz(data: st.DataObject) -> None:
            ensure_lease(srv, client)
            req = data.draw(requests_for(srv))
            resp = client.request(req.method, req.path, headers=req.wire_headers(),
                                  content=req.body)
            counts[resp.status_code] = counts.get(resp.status_code, 0) + 1
            check_response(srv, req, resp)
            if resp.status_code >= 400 and req.method != "HEAD":
                code = str(resp.json().get("code"))
                codes[code] = codes.get(code, 0) + 1
            if (req.path.endswith("/poll") and resp.status_code == 200
                    and srv.runner_id in req.path):
                srv.instance = str(req.headers.get("x-runner-instance", srv.instance))

        fuzz()
        total = sum(counts.values())
        print(f"statuses: {dict(sorted(counts.items()))} total={total} "
              f"codes: {dict(sorted(codes.items()))} channel/lease setups: {srv.setups}")
        assert total >= budget
        assert any(200 <= s < 300 for s in counts) and any(s >= 400 for s in counts)

        # Still healthy: a fresh instance connects, a queued command is delivered exactly as
        # queued, admitted, and its result reaches the caller.
        epoch = connect(srv, client)
        handle = srv.call(srv.cp.submit(srv.runner_id, "http",
                                        {"path": "/api/status", "method": "GET"}))
        resp = client.get(f"/api/runner/v1/{srv.runner_id}/poll", headers=legit_headers(srv))
        assert resp.status_code == 200, resp.text
        assert resp.json()["epoch"] == epoch
        commands = resp.json()["commands"]
        assert [c["id"] for c in commands] == [handle.id]
        # as queued, completed as upstream sends it (the profile in ``search``)
        assert commands[0]["payload"] == {"path": "/api/status", "method": "GET",
                                          "search": "?profile=default"}
        h = legit_headers(srv, epoch=epoch)
        base = f"/api/runner/v1/{srv.runner_id}"
        admit = client.post(f"{base}/admit", headers=h, json={"id": handle.id})
        assert admit.status_code == 200 and admit.json() == {"allowed": True}, admit.text
        result = {"status": 200, "headers": {}, "body": "e30="}
        posted = client.post(f"{base}/result", headers=h, json={"id": handle.id, "result": result})
        assert posted.status_code == 200 and posted.json() == {"ok": True}, posted.text

        async def outcome() -> Any:
            return await asyncio.wait_for(asyncio.shield(handle.future), 10)

        out = srv.call(outcome())
        assert out.ok and out.result == result, out

        # And the tool relay still dedupes: one execution, one shared answer.
        ensure_lease(srv, client)
        h = legit_headers(srv, epoch=srv.epoch())
        call = {"leaseId": srv.lease_id, "toolId": "create_member", "callId": "after-fuzz",
                "arguments": {"name": "Ada"}}
        first = client.post(f"{base}/tool", headers=h, json=call)
        again = client.post(f"{base}/tool", headers=h, json=call)
        assert first.status_code == again.status_code == 200, (first.text, again.text)
        assert first.json() == again.json() == {"result": {"done": "create_member"}}

        async def executions() -> int:
            lease = srv.cp.hub.slots[srv.runner_id].leases[srv.lease_id]
            return int(lease.calls.executions["after-fuzz"])

        assert srv.call(executions()) == 1


@pytest.mark.parametrize("path", ["/api/runner/v1//%0A", "/api/runner/v1/%0A/poll/x"])
def test_control_characters_in_path_get_a_json_404(server: Server, path: str) -> None:
    """Regression: a decoded newline once escaped the catch-all route (aiohttp's text 404)."""
    with httpx.Client(base_url=server.cp.url, timeout=10.0) as client:
        resp = client.get(path, headers={"Authorization": f"Bearer {server.token}"})
    assert resp.status_code == 404
    assert resp.headers.get("cache-control") == "no-store"
    assert set(resp.json()) == {"error", "code"}


@pytest.mark.parametrize("raw", [b'{"id":NaN}', b'{"id":Infinity}', b'{"id":-Infinity}'])
def test_non_json_constants_are_invalid_json(server: Server, raw: bytes) -> None:
    """JavaScript's JSON.parse (upstream) refuses NaN/Infinity; Python's json.loads would not."""
    with httpx.Client(base_url=server.cp.url, timeout=10.0) as client:
        connect(server, client)
        headers = legit_headers(server, epoch=server.epoch())
        resp = client.post(f"/api/runner/v1/{server.runner_id}/admit", headers=headers,
                           content=raw)
    assert (resp.status_code, resp.json().get("code")) == (400, "invalid_json")
