"""TT — team tools, the loopback listener's gates: token, Origin/Host, method, content type,
size, JSON shape, the order of the checks and the address it binds (§6.3).

Each case binds a lease, reads the lease token and the listener's port from the plugin's binding
in the scripted Hermes, and calls the listener directly over loopback, as the Hermes plugin would.
"""

from __future__ import annotations

import json
from typing import Any

from conformance.marks import case
from conformance.verdict import expect

from ._helpers_process import (
    LAN_HOST,
    TOOLS,
    bound_lease,
    call,
    listener,
    opaque_id,
    refuses_connection,
    relay_lines,
    tool_list,
    tool_relays,
)


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
