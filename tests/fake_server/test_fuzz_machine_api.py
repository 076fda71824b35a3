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
import uuid
from collections.abc import Coroutine, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar
from urllib.parse import quote

import httpx
import pytest
from hypothesis import given, seed, settings
from hypothesis import strategies as st

from conformance.portal import Portal
from fake_server import ControlPlane
from fake_server.timings import Timings
from tests.budget import examples

T = TypeVar("T")

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
ROUTES = ["poll", "admit", "result", "event", "tool", "check", "artifact", "control-check",
          "local-vm-check", "browser-check", "desktop", "execution-context", "network-settings"]
BODY_LIMIT = 16 * 1024 * 1024
KEYS = ["id", "connectionId", "frame", "closed", "result", "error", "leaseId", "toolId",
        "callId", "arguments", "phase", "name", "size", "digest", "index", "data", "message",
        "code", "type", "session_id", "payload", "scope", "grantId", "controlId"]
INSTANCE_POOL = [str(uuid.UUID(int=0xF00D0000 + i)) for i in range(4)]


# -- a ControlPlane on its own loop, behind a conformance Portal ------------------------------
@dataclass
class Server:
    cp: Any
    portal: Portal
    runner_id: str
    token: str = field(repr=False)
    other_runner: str
    other_token: str = field(repr=False)
    disabled_runner: str
    disabled_token: str = field(repr=False)
    instance: str = ""
    secrets: list[str] = field(default_factory=list, repr=False)
    connection_id: str = ""
    lease_id: str = ""
    setups: int = 0

    def call(self, coro: Coroutine[Any, Any, T], timeout: float = 30.0) -> T:
        return self.portal.run(coro, timeout=timeout)

    def lease_alive(self) -> bool:
        async def alive() -> bool:
            slot = self.cp.hub.slots.get(self.runner_id)
            lease = slot.leases.get(self.lease_id) if slot is not None else None
            return bool(lease is not None and lease.active
                         and await self.cp.hub.channel_valid(lease.channel))
        return bool(self.lease_id) and self.call(alive())

    def epoch(self) -> str | None:
        async def get() -> str | None:
            return self.cp.epoch(self.runner_id)  # type: ignore[no-any-return]
        return self.call(get())


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


# -- request generation ---------------------------------------------------------------------
class Req:
    """One generated request. Not a dataclass, so Hypothesis prints our redacting repr."""

    def __init__(self, method: str, path: str, headers: dict[str, str | bytes],
                 body: bytes | None, note: str) -> None:
        self.method, self.path, self.headers, self.body, self.note = (
            method, path, headers, body, note)

    def wire_headers(self) -> list[tuple[bytes, bytes]]:
        return [(k.encode(), v if isinstance(v, bytes) else v.encode("latin-1"))
                for k, v in self.headers.items()]

    def __repr__(self) -> str:  # shown by Hypothesis on failure: never print a token
        shown = {k: ("<redacted>" if k == "Authorization" else v) for k, v in self.headers.items()}
        size = None if self.body is None else len(self.body)
        head = None if self.body is None else self.body[:120]
        return (f"Req({self.method} {self.path} headers={shown} body[{size}]={head!r} "
                f"note={self.note})")


json_leaf = (st.none() | st.booleans() | st.integers(-(2**70), 2**70)
             | st.floats(allow_nan=False) | st.text(max_size=20)
             | st.sampled_from([str(uuid.uuid4()), "begin", "append", "finish", "0" * 64, ""]))
json_value = st.recursive(
    json_leaf,
    lambda kids: st.lists(kids, max_size=4)
    | st.dictionaries(st.sampled_from(KEYS) | st.text(max_size=6), kids, max_size=5),
    max_leaves=15,
)
route_objects = st.dictionaries(st.sampled_from(KEYS), json_value, max_size=7)

garbage_header = st.text(
    alphabet=st.characters(min_codepoint=0x20, max_codepoint=0xFF, blacklist_characters="\x7f"),
    max_size=40,
).map(lambda s: s.strip().encode("latin-1"))


@st.composite
def bodies(draw: st.DrawFn) -> tuple[bytes | None, str]:
    kind = draw(st.sampled_from(
        ["none", "object", "object", "object", "json", "invalid", "nonobject", "huge",
         "deep", "utf8", "oversize"]))
    if kind == "none":
        return None, kind
    if kind == "object":
        return json.dumps(draw(route_objects)).encode(), kind
    if kind == "json":
        return json.dumps(draw(json_value)).encode(), kind
    if kind == "invalid":
        return draw(st.sampled_from(
            [b"{", b"{'a':1}", b"", b"nul", b"{\"a\":}", b"\xff\xfe", b"[1,]", b"{\"a\":1}x",
             b"NaN", b"{\"a\":NaN}", b"\x00"])), kind
    if kind == "nonobject":
        return draw(st.sampled_from([b"[]", b"1", b"\"x\"", b"null", b"true", b"[{}]"])), kind
    if kind == "huge":
        n = draw(st.sampled_from([1 << 16, 1 << 20, 3 << 20]))
        key = draw(st.sampled_from(KEYS))
        return json.dumps({key: "x" * n, "id": str(uuid.uuid4())}).encode(), kind
    if kind == "deep":
        depth = draw(st.sampled_from([50, 1000, 100_000]))
        inner = b"[" * depth + b"]" * depth
        return b'{"id":' + inner + b"}", kind
    if kind == "utf8":
        return json.dumps({"id": draw(st.text(max_size=10)) + "\ud800"},
                          ensure_ascii=False).encode("utf-8", "surrogatepass"), kind
    # oversize: just over the 16 MiB limit (rare)
    if draw(st.integers(0, 9)) == 0:
        return b'{"id":"' + b"a" * (BODY_LIMIT) + b'"}', kind
    return b'{"id":"' + b"a" * 100 + b'"}', "object"


ABC_DIGEST = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"  # sha256("abc")


def shaped_body(srv: Server, route: str) -> st.SearchStrategy[dict[str, Any]]:
    """Bodies close to what each route expects (with the live channel and lease ids most of
    the time), so the route's own checks — artifact and tool dedupe included — are exercised."""
    uid = st.uuids().map(str)
    conn = st.sampled_from([srv.connection_id] * 4) | uid
    digest = st.sampled_from([ABC_DIGEST, "0" * 64])
    art = st.fixed_dictionaries({
        "connectionId": conn, "id": st.sampled_from(INSTANCE_POOL) | uid,
        "phase": st.sampled_from(["begin", "append", "finish"])},
        optional={"name": st.sampled_from(["a.txt", "b.txt"]), "size": st.sampled_from(
            [3, 3, 4, 0, -1, 26 * 1024 * 1024]), "digest": digest, "index": st.integers(-1, 3),
            "data": st.sampled_from(["YWJj", "YWJj", "YQ==", "Yg==", "", "!!"])})
    shapes: dict[str, st.SearchStrategy[dict[str, Any]]] = {
        "admit": st.fixed_dictionaries({"id": uid | json_value}),
        "result": st.fixed_dictionaries({"id": uid}, optional={
            "result": json_value, "error": st.fixed_dictionaries(
                {"message": st.text(max_size=20), "code": st.text(max_size=10)}) | json_value}),
        "event": st.fixed_dictionaries({"connectionId": uid}, optional={
            "frame": st.fixed_dictionaries({"type": st.sampled_from(["message.delta", "x"])},
                                           optional={"session_id": st.text(max_size=8),
                                                     "payload": json_value}) | json_value,
            "closed": st.booleans() | json_value}),
        "tool": st.fixed_dictionaries({
            "leaseId": st.sampled_from([srv.lease_id] * 4) | uid | st.text(max_size=5),
            "toolId": st.sampled_from(["create_member", "form_team"])
            | st.text(min_size=0, max_size=101),
            "callId": st.sampled_from(["c1", "c2", "c3"]) | st.text(min_size=0, max_size=3),
            "arguments": st.sampled_from([{}, {"n": 1}, {"n": 1.0}]) | st.dictionaries(
                st.text(max_size=3), json_value, max_size=3)}),
        "check": st.fixed_dictionaries({"connectionId": conn | json_value}),
        "artifact": art,
    }
    return shapes.get(route, route_objects)


def requests_for(srv: Server) -> st.SearchStrategy[Req]:
    @st.composite
    def envelope(draw: st.DrawFn) -> Req:
        """A well-formed request of the current instance, with at most one thing wrong."""
        route = draw(st.sampled_from(ROUTES))
        method = "GET" if route == "poll" else "POST"
        headers: dict[str, str | bytes] = {
            "Authorization": f"Bearer {srv.token}", "x-runner-instance": srv.instance,
            "x-runner-protocol": "1", "x-runner-epoch": srv.epoch() or "none"}
        body: bytes | None = None
        kind = "none"
        if route != "poll":
            if draw(st.integers(0, 4)):
                body, kind = json.dumps(draw(shaped_body(srv, route))).encode(), "shaped"
            else:
                body, kind = draw(bodies())
            headers["Content-Type"] = "application/json"
        flaw = draw(st.sampled_from(["none"] * 6 + [
            "method", "auth", "instance", "protocol", "epoch", "reset", "origin", "features"]))
        if flaw == "method":
            method = draw(st.sampled_from(["GET", "POST", "PUT", "DELETE", "PATCH", "HEAD"]))
        elif flaw == "auth":
            headers["Authorization"] = draw(st.sampled_from([
                f"Bearer {srv.other_token}", f"bearer {srv.token}", srv.token, "Bearer",
                f"Bearer {srv.token[:-1]}", f"Basic {srv.token}"]))
        elif flaw == "instance":
            headers["x-runner-instance"] = draw(st.sampled_from(INSTANCE_POOL) | garbage_header)
        elif flaw == "protocol":
            headers["x-runner-protocol"] = draw(st.sampled_from(["2", "0", "", "1,1"]))
        elif flaw == "epoch":
            headers["x-runner-epoch"] = draw(garbage_header)
        elif flaw == "reset":
            headers["x-runner-reset"] = "1"
        elif flaw == "origin":
            headers["Origin"] = "http://evil.example"
        elif flaw == "features":
            headers["x-runner-features"] = draw(garbage_header | st.just("a," * 3000))
        path = f"/api/runner/v1/{srv.runner_id}/{route}"
        return Req(method, path, headers, body, f"envelope/{flaw}/{kind}")

    @st.composite
    def build(draw: st.DrawFn) -> Req:
        route = draw(st.sampled_from(ROUTES) | st.sampled_from(
            ["heartbeat", "", "POLL", "poll/extra", "..", "%2e%2e", "admit?x=1"])
            | st.text(alphabet=st.characters(blacklist_categories=["Cs"]),
                      min_size=1, max_size=12))
        rid = draw(st.sampled_from([srv.runner_id] * 6 + [
            srv.other_runner, srv.disabled_runner, str(uuid.uuid4()), "not-a-runner",
            srv.runner_id.upper(), ""]))
        path = "/api/runner/v1/" + quote(rid, safe="") + "/" + quote(route, safe="/?=")
        if draw(st.integers(0, 30)) == 0:
            path = draw(st.sampled_from(["/api/runner/v1/", "/api/runner/v1/" + rid,
                                         "/api/runner/v2/" + rid + "/poll"]))
        method = draw(st.sampled_from(["GET"] * 3 + ["POST"] * 6 + ["PUT", "DELETE", "PATCH",
                                                                     "OPTIONS", "HEAD"]))
        headers: dict[str, str | bytes] = {}
        auth = draw(st.sampled_from(
            ["good"] * 7 + ["absent", "other", "disabled", "wrong", "noprefix", "lower",
                            "garbage", "space"]))
        token = {"other": srv.other_token, "disabled": srv.disabled_token,
                 "wrong": "x" * 43}.get(auth, srv.token)
        if rid == srv.disabled_runner and auth == "good":
            token = srv.disabled_token
        if auth in ("good", "other", "disabled", "wrong"):
            headers["Authorization"] = f"Bearer {token}"
        elif auth == "noprefix":
            headers["Authorization"] = token
        elif auth == "lower":
            headers["Authorization"] = f"bearer {token}"
        elif auth == "space":
            headers["Authorization"] = f"Bearer  {token}"
        elif auth == "garbage":
            headers["Authorization"] = draw(garbage_header)
        inst = draw(st.sampled_from(["current"] * 6 + ["pool", "absent", "garbage", "fresh"]))
        if inst == "current" and srv.instance:
            headers["x-runner-instance"] = srv.instance
        elif inst == "pool":
            headers["x-runner-instance"] = draw(st.sampled_from(INSTANCE_POOL))
        elif inst == "garbage":
            headers["x-runner-instance"] = draw(garbage_header)
        elif inst == "fresh" and draw(st.integers(0, 19)) == 0:
            headers["x-runner-instance"] = str(uuid.uuid4())  # rare: each one retires another
        proto = draw(st.sampled_from(["1"] * 8 + ["absent", "2", "01", "1.0"]))
        if proto != "absent":
            headers["x-runner-protocol"] = proto
        ep = draw(st.sampled_from(["current"] * 6 + ["absent", "stale", "garbage"]))
        if ep == "current":
            headers["x-runner-epoch"] = srv.epoch() or "none"
        elif ep == "stale":
            headers["x-runner-epoch"] = f"{uuid.uuid4()}:{uuid.uuid4()}"
        elif ep == "garbage":
            headers["x-runner-epoch"] = draw(garbage_header)
        reset = draw(st.sampled_from(["absent"] * 8 + ["1", "0", "true"]))
        if reset != "absent":
            headers["x-runner-reset"] = reset
        feats = draw(st.sampled_from(["absent"] * 3 + [
            "", "execution-context-v1,workspace-memory-bind-v1,credential-ref-v1",
            "bogus-v9", ",,,", "a" * 5000]) | garbage_header)
        if feats != "absent":
            headers["x-runner-features"] = feats
        if draw(st.integers(0, 12)) == 0:
            headers["Origin"] = draw(st.sampled_from(["http://evil.example", "null", ""]))
        body, kind = draw(bodies())
        if body is not None:
            headers["Content-Type"] = draw(st.sampled_from(
                ["application/json"] * 4 + ["text/plain", "application/x-www-form-urlencoded"]))
        return Req(method, path, headers, body, f"{auth}/{inst}/{proto}/{ep}/{kind}")

    return envelope() | envelope() | build()


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


def legit_headers(srv: Server, *, reset: bool = False, epoch: str | None = None) -> dict[str, str]:
    h = {"Authorization": f"Bearer {srv.token}", "x-runner-instance": srv.instance,
         "x-runner-protocol": "1",
         "x-runner-features": "execution-context-v1,workspace-memory-bind-v1,credential-ref-v1"}
    if reset:
        h["x-runner-reset"] = "1"
    if epoch is not None:
        h["x-runner-epoch"] = epoch
    return h


def connect(srv: Server, client: httpx.Client) -> str:
    """Become the runner's current instance with a reset poll; returns the epoch."""
    srv.instance = str(uuid.uuid4())
    resp = client.get(f"/api/runner/v1/{srv.runner_id}/poll", headers=legit_headers(srv, reset=True))
    assert resp.status_code == 200, resp.text
    return str(resp.json()["epoch"])


def answer_commands(srv: Server, client: httpx.Client, fut: Any) -> Any:
    """Act as the runner (poll, admit, result ``{ok:true}``) until ``fut`` resolves."""
    base = f"/api/runner/v1/{srv.runner_id}"
    for _ in range(200):  # bounded: each poll is held at most poll_hold (0.05 s)
        if fut.done():
            return fut.result()
        resp = client.get(f"{base}/poll", headers=legit_headers(srv))
        assert resp.status_code == 200, resp.text
        epoch = resp.json()["epoch"]
        for cmd in resp.json()["commands"]:
            h = legit_headers(srv, epoch=epoch)
            client.post(f"{base}/admit", headers=h, json={"id": cmd["id"]})
            client.post(f"{base}/result", headers=h, json={"id": cmd["id"], "result": {"ok": True}})
    return fut.result(timeout=10)


def ensure_lease(srv: Server, client: httpx.Client) -> None:
    """Keep a live channel and hub lease for the fuzz to aim at (fuzz may disconnect them)."""
    if srv.lease_alive():
        return
    srv.setups += 1
    resp = client.get(f"/api/runner/v1/{srv.runner_id}/poll",
                      headers=legit_headers(srv, reset=True))
    if resp.status_code != 200:  # our instance was retired by a fuzzed poll: start afresh
        connect(srv, client)
    cp, portal = srv.cp, srv.portal
    ch = answer_commands(srv, client, portal.soon(
        cp.open_channel(srv.runner_id, profile="default")))
    lease = answer_commands(srv, client, portal.soon(cp.create_lease(
        ch, profile="default", session={"runtimeId": "5748f884", "storedId": "s1"},
        tools=[{"id": "create_member", "name": "create_member", "description": "",
                "inputSchema": {"type": "object"}}],
        handlers={"*": lambda tool_id, args: {"done": tool_id}})))
    srv.connection_id, srv.lease_id = ch.connection_id, lease.lease_id


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
        assert commands[0]["payload"] == {"path": "/api/status", "method": "GET"}
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
