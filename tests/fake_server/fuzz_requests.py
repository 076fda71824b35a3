"""The machine-API fuzz's requests: Hypothesis strategies for routes, methods, headers and bodies,
well-formed envelopes with one thing wrong, and anything at all (``requests_for``)."""
from __future__ import annotations

import json
import uuid
from typing import Any
from urllib.parse import quote

from hypothesis import strategies as st

from .fuzz_server import Server

ROUTES = ["poll", "admit", "result", "event", "tool", "check", "artifact", "control-check",
          "local-vm-check", "browser-check", "desktop", "execution-context", "network-settings"]
BODY_LIMIT = 16 * 1024 * 1024
KEYS = ["id", "connectionId", "frame", "closed", "result", "error", "leaseId", "toolId",
        "callId", "arguments", "phase", "name", "size", "digest", "index", "data", "message",
        "code", "type", "session_id", "payload", "scope", "grantId", "controlId"]
INSTANCE_POOL = [str(uuid.UUID(int=0xF00D0000 + i)) for i in range(4)]


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
