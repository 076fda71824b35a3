"""TT — team tools: leases, the loopback listener, bind/unbind and the tool relay (§3.5–3.7, §6).

Each case creates an owned session on a channel, a lease and (mostly) its bind through the
control plane, reads the plugin's binding (bridge URL, lease token) from the scripted Hermes, and
then calls the runner's listener directly over loopback, as the Hermes plugin would.
"""

from __future__ import annotations

import json
import re
from typing import Any

from conformance.marks import case
from conformance.verdict import CaseFailed, expect
from fake_server import ToolError

from ._helpers_process import (
    LAN_HOST,
    TOOLS,
    bound_lease,
    call,
    listener,
    opaque_id,
    owned_session,
    refuses_connection,
    relay_lines,
    tool_list,
    tool_relays,
)

OPAQUE = re.compile(r"^team_[0-9a-f]{32}$")


@case("TT-001")
async def test_bind_carries_bridge_url_token_session_generation(world: Any) -> None:
    """fails when: the runner binds without the lease's session ids, with a non-loopback or
    missing bridge_url, an empty token, or never calls the plugin's bind."""
    b = await bound_lease(world)
    effects = world.hermes.effects.of("bind", session_id=b.session["runtimeId"])
    witness = [json.dumps(world.redact(json.dumps(e.to_json()))) for e in effects]
    expect(len(effects) == 1, expected="one bind for the lease's session", actual=len(effects),
           witness=witness)
    got = b.binding
    expect(got.get("session_id") == b.session["runtimeId"]
           and got.get("stored_session_id") == b.session["storedId"],
           expected=f"bind for session {b.session}",
           actual=f"{got.get('session_id')} / {got.get('stored_session_id')}", witness=witness)
    expect(re.match(r"^http://127\.0\.0\.1:\d+/?$", str(got.get("bridge_url", ""))) is not None,
           expected="bridge_url http://127.0.0.1:<port>", actual=got.get("bridge_url"),
           witness=witness)
    expect(isinstance(got.get("token"), str) and len(got["token"]) >= 32,
           expected="a lease token of >= 32 chars", actual=f"{len(str(got.get('token') or ''))} chars",
           witness=witness)
    expect(isinstance(got.get("generation"), str) and bool(got["generation"]),
           expected="a non-empty generation", actual=got.get("generation"), witness=witness)
    expect(got.get("profile") == "default", expected="profile default", actual=got.get("profile"),
           witness=witness)


@case("TT-002")
async def test_opaque_ids_hide_the_real_ids_and_are_stable(world: Any) -> None:
    """fails when: tools/list shows the real ids (or ids not shaped team_<32hex>), or the ids
    change between two lists of one lease."""
    b = await bound_lease(world)
    first = await tool_list(b)
    second = await tool_list(b)
    ids = [t.get("id") for t in first]
    expect(len(first) == len(TOOLS), expected=f"{len(TOOLS)} tools", actual=ids)
    expect(all(isinstance(i, str) and OPAQUE.match(i) for i in ids),
           expected="every id team_<32 hex>", actual=ids)
    blob = json.dumps(first) + json.dumps(second)
    leaked = [t["id"] for t in TOOLS if t["id"] in blob]
    expect(not leaked, expected="no real tool id in tools/list", actual=f"real ids shown: {leaked}")
    expect(ids == [t.get("id") for t in second], expected="the same ids on a second tools/list",
           actual=f"{ids} then {[t.get('id') for t in second]}")


@case("TT-003")
async def test_two_leases_get_distinct_opaque_ids(world: Any) -> None:
    """fails when: the opaque id is derived from the real id alone (same for every lease)."""
    a = await bound_lease(world)
    b = await bound_lease(world, channel=a.channel)
    ida, idb = await opaque_id(a, "create_member"), await opaque_id(b, "create_member")
    expect(a.token != b.token, expected="one token per lease", actual="two leases share a token")
    expect(ida != idb, expected="distinct opaque ids for two concurrent leases",
           actual=f"both {ida}")


@case("TT-004")
async def test_listener_refuses_missing_or_wrong_token(world: Any) -> None:
    """fails when: the listener serves a request without the lease token, or with another
    lease's / a made-up token (no constant-time compare of the exact token)."""
    b = await bound_lease(world)
    missing = await listener(b, "/tools/list", {}, token=None)
    wrong = await listener(b, "/tools/list", {}, token=b.token[:-4] + "AAAA")
    for name, ans in (("no Authorization", missing), ("a wrong token", wrong)):
        expect(ans.status == 401 and ans.code == "team_tools_unauthorized",
               expected=f"{name} → 401 team_tools_unauthorized", actual=str(ans))
    expect(not tool_relays(world, b.lease), expected="no relay", actual=relay_lines(world, b.lease))


@case("TT-005")
async def test_listener_refuses_origin_and_wrong_host(world: Any) -> None:
    """fails when: the listener accepts a browser request (Origin header) or a Host other than
    127.0.0.1:<port> (DNS rebinding)."""
    b = await bound_lease(world)
    origin = await listener(b, "/tools/list", {}, headers={"Origin": f"http://127.0.0.1:{b.port}"})
    host = await listener(b, "/tools/list", {}, headers={"Host": f"localhost:{b.port}"})
    other = await listener(b, "/tools/list", {}, headers={"Host": "evil.example:80"})
    for name, ans in (("an Origin header", origin), ("Host localhost:<port>", host),
                      ("Host evil.example", other)):
        expect(ans.status == 403 and ans.code == "team_tools_forbidden",
               expected=f"{name} → 403 team_tools_forbidden", actual=str(ans))


@case("TT-006")
async def test_listener_refuses_non_post(world: Any) -> None:
    """fails when: the listener answers GET (or PUT) on a tool route with anything but 405."""
    b = await bound_lease(world)
    get = await listener(b, "/tools/list", method="GET")
    put = await listener(b, "/tools/list", {}, method="PUT")
    for name, ans in (("GET", get), ("PUT", put)):
        expect(ans.status == 405, expected=f"{name} /tools/list → 405", actual=str(ans))


@case("TT-007")
async def test_listener_refuses_non_json_content_type(world: Any) -> None:
    """fails when: the listener parses a body sent as text/plain (no Content-Type check)."""
    b = await bound_lease(world)
    ans = await listener(b, "/tools/list", data=b"{}", headers={"Content-Type": "text/plain"})
    expect(ans.status == 415, expected="text/plain → 415", actual=str(ans))


@case("TT-008")
async def test_listener_refuses_body_over_256_kib(world: Any) -> None:
    """fails when: the listener has no 256 KiB body limit (or a larger one)."""
    b = await bound_lease(world)
    big = json.dumps({"toolId": "x", "callId": "c", "arguments": {"pad": "a" * (256 * 1024)}})
    ans = await listener(b, "/tools/call", data=big.encode(),
                         headers={"Content-Type": "application/json"})
    expect(ans.status == 413 and ans.code == "team_tool_input_limit",
           expected="a body of 256 KiB + 40 bytes → 413 team_tool_input_limit", actual=str(ans))
    expect(not tool_relays(world, b.lease), expected="no relay", actual=relay_lines(world, b.lease))


@case("TT-009")
async def test_listener_refuses_bad_json_and_unknown_tool(world: Any) -> None:
    """fails when: invalid JSON or a non-object body is not 400 invalid_json, or a call of a tool
    outside the lease's catalog (e.g. a real id) is relayed instead of 404 team_tool_not_found."""
    b = await bound_lease(world)
    ctype = {"Content-Type": "application/json"}
    broken = await listener(b, "/tools/call", data=b"{not json", headers=ctype)
    array = await listener(b, "/tools/call", data=b"[1, 2]", headers=ctype)
    for name, ans in (("a broken JSON body", broken), ("a JSON array", array)):
        expect(ans.status == 400 and ans.code == "invalid_json",
               expected=f"{name} → 400 invalid_json", actual=str(ans))
    unknown = await call(b, "team_" + "0" * 32, {}, "call-unknown")
    real = await call(b, TOOLS[0]["id"], {}, "call-real-id")
    for name, ans in (("an unknown opaque id", unknown), ("the real id", real)):
        expect(ans.status == 404 and ans.code == "team_tool_not_found",
               expected=f"{name} → 404 team_tool_not_found", actual=str(ans))
    expect(not tool_relays(world, b.lease), expected="no relay", actual=relay_lines(world, b.lease))


@case("TT-010")
async def test_call_is_relayed_with_the_real_id_and_wrapped(world: Any) -> None:
    """fails when: the relay carries the opaque id (or loses arguments/callId/leaseId), a plain
    result is not wrapped as content + structuredContent, or a content array is re-wrapped."""
    seen: list[tuple[str, dict[str, Any]]] = []
    content = {"content": [{"type": "text", "text": "formed"}]}

    def handler(tool_id: str, arguments: dict[str, Any]) -> Any:
        seen.append((tool_id, arguments))
        return content if tool_id == TOOLS[1]["id"] else {"member": arguments.get("name"), "n": 1}

    b = await bound_lease(world, handlers={"*": handler})
    member, team = await opaque_id(b, "create_member"), await opaque_id(b, "form_team")
    args = {"name": "Ada", "role": "reviewer"}
    plain = await call(b, member, args, "call-plain-1")
    passed = await call(b, team, {"members": ["Ada"]}, "call-content-1")
    relays = tool_relays(world, b.lease)
    witness = [world.redact(json.dumps(ex.request_body)) for ex in relays]
    bodies = {ex.call_id: ex.request_body for ex in relays}
    expect(bodies.get("call-plain-1") == {"leaseId": b.lease.lease_id, "toolId": TOOLS[0]["id"],
                                          "arguments": args, "callId": "call-plain-1"},
           expected="tool {leaseId, toolId: <real id>, arguments, callId}",
           actual=bodies.get("call-plain-1"), witness=witness)
    expect(seen and seen[0] == (TOOLS[0]["id"], args), expected="the control plane sees the real id",
           actual=seen, witness=witness)
    want = {"member": "Ada", "n": 1}
    ok = (plain.status == 200 and isinstance(plain.body, dict)
          and plain.body.get("structuredContent") == want
          and isinstance(plain.body.get("content"), list) and plain.body["content"]
          and plain.body["content"][0].get("type") == "text"
          and json.loads(plain.body["content"][0].get("text", "null")) == want
          and not plain.body.get("isError"))
    expect(ok, expected=f"200 {{content:[{{type:text, text:{json.dumps(want)}}}], "
                        f"structuredContent:{json.dumps(want)}}}", actual=str(plain), witness=witness)
    expect(passed.status == 200 and passed.body == content,
           expected=f"a content array passed through unchanged: 200 {json.dumps(content)}",
           actual=str(passed), witness=witness)


@case("TT-011")
async def test_same_call_id_relays_once_and_revocation_gives_is_error(world: Any) -> None:
    """fails when: a repeated callId is relayed again or answered differently (no dedupe on the
    listener), or a call after the grant was revoked is answered as a success."""
    count = {"n": 0}

    def handler(tool_id: str, arguments: dict[str, Any]) -> Any:
        count["n"] += 1
        return {"created": arguments.get("name"), "execution": count["n"]}

    b = await bound_lease(world, handlers={"*": handler})
    tid = await opaque_id(b, "create_member")
    one = await call(b, tid, {"name": "Ada"}, "call-dup-1")
    two = await call(b, tid, {"name": "Ada"}, "call-dup-1")
    relays = tool_relays(world, b.lease, "call-dup-1")
    expect(one.status == 200 and two.status == 200 and one.body == two.body,
           expected="the same 200 result twice", actual=f"{one} / {two}",
           witness=relay_lines(world, b.lease))
    expect(len(relays) == 1 and b.lease.executions == 1,
           expected="one relay, one execution", actual=f"{len(relays)} relays, "
           f"{b.lease.executions} executions", witness=relay_lines(world, b.lease))
    world.cp.revoke_lease(b.lease)
    after = await call(b, tid, {"name": "Bob"}, "call-after-revoke")
    ok = after.status == 200 and isinstance(after.body, dict) and after.body.get("isError") is True
    expect(ok or after.status == 410, expected="after revocation: 200 {isError:true} "
           "(or 410 team_tools_expired)", actual=str(after), witness=relay_lines(world, b.lease))
    expect(b.lease.executions == 1, expected="no execution after revocation",
           actual=f"{b.lease.executions} executions", witness=relay_lines(world, b.lease))


@case("TT-012")
async def test_same_call_id_other_arguments_is_a_conflict(world: Any) -> None:
    """fails when: the listener keys its dedupe on callId alone (answers the stored result) or
    relays the changed call (the control plane's 409 wrapped as isError)."""
    b = await bound_lease(world)
    tid = await opaque_id(b, "create_member")
    first = await call(b, tid, {"name": "Ada"}, "call-conflict-1")
    second = await call(b, tid, {"name": "Eve"}, "call-conflict-1")
    expect(first.status == 200, expected="the first call → 200", actual=str(first))
    expect(second.status == 409 and second.code == "idempotency_conflict",
           expected="same callId, other arguments → 409 idempotency_conflict", actual=str(second),
           witness=relay_lines(world, b.lease))
    expect(len(tool_relays(world, b.lease, "call-conflict-1")) == 1, expected="one relay",
           actual=relay_lines(world, b.lease))


@case("TT-013")
async def test_call_limit_per_lease(world: Any) -> None:
    """fails when: the listener has no 128 callId limit (the 129th is relayed; the control
    plane's 429 runner_call_limit comes back wrapped) or a lower one."""
    b = await bound_lease(world, handlers={"*": lambda t, a: {"ok": True}})
    tid = await opaque_id(b, "create_member")
    for i in range(128):
        ans = await call(b, tid, {"i": i}, f"call-limit-{i}")
        if ans.status != 200:
            raise CaseFailed("128 distinct callIds are served", f"call {i + 1} → {ans}",
                             relay_lines(world, b.lease)[-3:])
    extra = await call(b, tid, {"i": 128}, "call-limit-128")
    expect(extra.status == 429 and extra.code == "team_tool_call_limit",
           expected="the 129th callId → 429 team_tool_call_limit", actual=str(extra),
           witness=relay_lines(world, b.lease)[-2:])
    expect(not tool_relays(world, b.lease, "call-limit-128"), expected="the 129th is not relayed",
           actual=relay_lines(world, b.lease)[-1:])


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


@case("TT-015")
async def test_control_plane_tool_error_is_http_200_is_error(world: Any) -> None:
    """fails when: the listener passes the control plane's error status through (e.g. 403) or
    drops its code, instead of HTTP 200 {content:[text of {error, code}], isError:true}."""
    def handler(tool_id: str, arguments: dict[str, Any]) -> Any:
        raise ToolError(403, "workspace_member_forbidden", "not allowed to add members")

    b = await bound_lease(world, handlers={"*": handler})
    ans = await call(b, await opaque_id(b, "create_member"), {"name": "Ada"}, "call-err-1")
    relays = relay_lines(world, b.lease)
    body = ans.body if isinstance(ans.body, dict) else {}
    expect(ans.status == 200 and body.get("isError") is True,
           expected="HTTP 200 with isError:true", actual=str(ans), witness=relays)
    try:
        inner = json.loads(body["content"][0]["text"])
    except (KeyError, IndexError, TypeError, ValueError):
        inner = None
    expect(isinstance(inner, dict) and inner.get("code") == "workspace_member_forbidden"
           and "error" in inner,
           expected='content[0].text = JSON {"error": …, "code": "workspace_member_forbidden"}',
           actual=str(ans), witness=relays)


@case("TT-016")
async def test_lease_close_unbinds_and_closes_the_listener(world: Any) -> None:
    """fails when: lease.close forgets the plugin's unbind (or sends another generation or
    session), or leaves the listener serving."""
    b = await bound_lease(world)
    out = await world.cp.close_lease(b.lease)
    expect(out.ok, expected="lease.close → ok", actual=f"{out.status} {out.code}")
    unbind = await world.hermes.effects.wait_for("unbind", timeout=10,
                                                 session_id=b.session["runtimeId"])
    expect(unbind.detail.get("generation") == b.binding["generation"]
           and unbind.detail.get("removed") is True,
           expected=f"unbind of session {b.session['runtimeId']} with the bind's generation",
           actual=json.dumps(unbind.to_json(), default=str))
    gone = await refuses_connection("127.0.0.1", b.port)
    if not gone:
        ans = await listener(b, "/tools/list", {})
        expect(ans.status in (401, 404, 410), expected="the closed lease's listener serves nothing",
               actual=f"tools/list after close → {ans}")


@case("TT-017")
async def test_listener_binds_only_127_0_0_1(world: Any) -> None:
    """fails when: the listener binds 0.0.0.0 / :: (or any address beside 127.0.0.1)."""
    b = await bound_lease(world)
    await tool_list(b)  # it serves on 127.0.0.1
    for host in (LAN_HOST, "::1"):
        expect(await refuses_connection(host, b.port),
               expected=f"no listener on {host}:{b.port}",
               actual=f"{host}:{b.port} accepts connections")


@case("TT-018")
async def test_listener_refusals_carry_codes(world: Any) -> None:
    """fails when: a refusal has no JSON {error, code} body (e.g. a bare 415 or 405 page)."""
    b = await bound_lease(world)
    ctype = await listener(b, "/tools/list", data=b"{}", headers={"Content-Type": "text/plain"})
    get = await listener(b, "/tools/list", method="GET")
    expect(ctype.code == "invalid_content_type" and isinstance(ctype.body.get("error"), str),
           expected='415 {"error": …, "code": "invalid_content_type"}', actual=str(ctype))
    expect(isinstance(get.body, dict) and isinstance(get.body.get("code"), str)
           and isinstance(get.body.get("error"), str),
           expected='405 {"error": …, "code": …}', actual=str(get))


@case("TT-019")
async def test_listener_checks_in_order(world: Any) -> None:
    """fails when: the listener checks the token before Origin/Host, the method or content type
    before the token, or parses before the size check."""
    b = await bound_lease(world)
    big = b"[" + b"1," * (140 * 1024) + b"1]"  # over 256 KiB and not an object
    steps = [
        ("Origin + no token", dict(token=None, headers={"Origin": "http://127.0.0.1"}), 403),
        ("no token + GET", dict(token=None, method="GET"), 401),
        ("GET + text/plain", dict(method="GET", headers={"Content-Type": "text/plain"}), 405),
        ("text/plain + 280 KiB", dict(data=big, headers={"Content-Type": "text/plain"}), 415),
        ("280 KiB non-object JSON", dict(data=big, headers={"Content-Type": "application/json"}),
         413),
    ]
    for name, kw, status in steps:
        ans = await listener(b, "/tools/call", **kw)  # type: ignore[arg-type]
        expect(ans.status == status, expected=f"{name} → {status}", actual=str(ans))


@case("TT-020")
async def test_call_body_without_fields_is_400(world: Any) -> None:
    """fails when: the listener relays a call without toolId / callId, or with non-object
    arguments (no shape check before the relay)."""
    b = await bound_lease(world)
    tid = await opaque_id(b, "create_member")
    bodies = [("no toolId", {"arguments": {}, "callId": "c-1"}),
              ("no callId", {"toolId": tid, "arguments": {}}),
              ("arguments a list", {"toolId": tid, "arguments": [1], "callId": "c-3"}),
              ("callId over 200 chars", {"toolId": tid, "arguments": {}, "callId": "c" * 201})]
    for name, body in bodies:
        ans = await listener(b, "/tools/call", body)
        expect(ans.status == 400, expected=f"{name} → 400", actual=str(ans))
    expect(not tool_relays(world, b.lease), expected="no relay", actual=relay_lines(world, b.lease))


@case("TT-021")
async def test_fingerprint_ignores_argument_key_order(world: Any) -> None:
    """fails when: the listener fingerprints arguments in their wire key order (a reordered
    repeat is refused 409 or relayed again)."""
    b = await bound_lease(world)
    tid = await opaque_id(b, "create_member")
    # json.dumps keeps a dict's insertion order: the two bodies differ only in key order
    one = await call(b, tid, {"name": "Ada", "role": "lead"}, "call-order")
    two = await call(b, tid, {"role": "lead", "name": "Ada"}, "call-order")
    expect(one.status == 200 and two.status == 200 and one.body == two.body,
           expected="the reordered repeat gets the first result", actual=f"{one} / {two}",
           witness=relay_lines(world, b.lease))
    expect(len(tool_relays(world, b.lease, "call-order")) == 1, expected="one relay",
           actual=relay_lines(world, b.lease))


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


@case("TT-025")
async def test_relay_410_disposes_the_lease(world: Any) -> None:
    """fails when: after the relay answered 410 the runner keeps the lease and relays the next
    call too."""
    b = await bound_lease(world)
    tid = await opaque_id(b, "create_member")
    world.cp.revoke_lease(b.lease)
    first = await call(b, tid, {"name": "Ada"}, "call-gone-1")
    expect(first.status in (200, 410), expected="the first call after revocation is refused",
           actual=str(first))
    relays = len(tool_relays(world, b.lease))
    if await refuses_connection("127.0.0.1", b.port):
        return
    second = await call(b, tid, {"name": "Bob"}, "call-gone-2")
    expect(len(tool_relays(world, b.lease)) == relays,
           expected="the next call is not relayed (the lease was disposed)",
           actual=f"relayed again: {second}", witness=relay_lines(world, b.lease))
