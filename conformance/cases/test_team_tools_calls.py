"""TT — team tools, tools/list and tools/call: opaque tool ids, the relay to the control plane,
the result wrapping, callId dedupe and its limits, and revocation (§6.2–6.3).

Each case binds a lease and calls the runner's listener directly over loopback, as the Hermes
plugin would; the relays are read from the control plane's history.
"""

from __future__ import annotations

import json
import re
from typing import Any

from conformance.marks import case
from conformance.verdict import CaseFailed, expect
from conformance.witness import lines_of
from fake_server import ToolError

from ._helpers_process import (
    TOOLS,
    bound_lease,
    call,
    opaque_id,
    refuses_connection,
    relay_lines,
    tool_list,
    tool_relays,
)

OPAQUE = re.compile(r"^team_[0-9a-f]{32}$")


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
    witness = lines_of(world, relays)
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
