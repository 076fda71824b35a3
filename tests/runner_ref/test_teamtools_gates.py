"""The loopback listener's gates (sans-IO): each gate, and the order when several fail."""
from __future__ import annotations

import dataclasses
import itertools
import json
from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from runner_ref.teamtools import gates
from runner_ref.teamtools.gates import Accepted, Context, GateInput, Refusal

TOKEN = "t" * 43
CTX = Context(port=40000, token=TOKEN)
GOOD = GateInput(
    peer_ip="127.0.0.1", host="127.0.0.1:40000", origin=None, authorization=f"Bearer {TOKEN}",
    lease_active=True, method="POST", content_type="application/json", content_length=2,
    body=b"{}",
)

Breaker = Callable[[GateInput], GateInput]


def _r(**changes: object) -> Breaker:
    return lambda req: dataclasses.replace(req, **changes)  # type: ignore[arg-type]


# One way to break each gate, in the protocol's order; each touches a different field.
BREAKERS: list[tuple[int, str, Breaker]] = [
    (403, "team_tools_forbidden", _r(origin="http://evil.example")),
    (401, "team_tools_unauthorized", _r(authorization="Bearer nope")),
    (410, "team_tools_expired", _r(lease_active=False)),
    (405, "method_not_allowed", _r(method="GET")),
    (415, "invalid_content_type", _r(content_type="text/plain")),
    (413, "team_tool_input_limit", _r(content_length=gates.MAX_BODY_BYTES + 1)),
    (400, "invalid_json", _r(body=b"{nope")),
]


def verdict(req: GateInput) -> tuple[int, str] | dict[str, object]:
    out = gates.check(req, CTX)
    if isinstance(out, Refusal):
        return (out.status, out.code)
    assert isinstance(out, Accepted)
    return out.body


def test_a_good_request_passes_with_its_parsed_body() -> None:
    assert verdict(dataclasses.replace(GOOD, body=b'{"a": [1, {"b": null}]}')) == {
        "a": [1, {"b": None}]}
    assert gates.check_head(GOOD, CTX) is None


@pytest.mark.parametrize("status,code,breaker", BREAKERS, ids=[b[1] for b in BREAKERS])
def test_each_gate_alone(status: int, code: str, breaker: Breaker) -> None:
    assert verdict(breaker(GOOD)) == (status, code)


@pytest.mark.parametrize("first,second", list(itertools.combinations(range(len(BREAKERS)), 2)))
def test_when_two_gates_fail_the_earlier_one_answers(first: int, second: int) -> None:
    req = BREAKERS[second][2](BREAKERS[first][2](GOOD))
    assert verdict(req) == BREAKERS[first][:2]


@given(st.sets(st.integers(0, len(BREAKERS) - 1), min_size=1))
def test_any_set_of_failures_is_answered_by_the_first_in_order(broken: set[int]) -> None:
    req = GOOD
    for index in sorted(broken, reverse=True):
        req = BREAKERS[index][2](req)
    assert verdict(req) == BREAKERS[min(broken)][:2]


def test_head_phase_never_needs_the_body() -> None:
    head = dataclasses.replace(GOOD, body=None)
    assert gates.check_head(head, CTX) is None
    big = dataclasses.replace(head, content_length=gates.MAX_BODY_BYTES + 1)
    refusal = gates.check_head(big, CTX)
    assert refusal is not None and refusal.code == "team_tool_input_limit"
    assert verdict(head) == (400, "invalid_json")  # a missing body is not JSON


@pytest.mark.parametrize("change", [
    {"peer_ip": "10.0.0.5"}, {"peer_ip": "127.0.0.2"}, {"peer_ip": "::1"}, {"peer_ip": None},
    {"host": "localhost:40000"}, {"host": "127.0.0.1"}, {"host": "127.0.0.1:40001"},
    {"host": "127.0.0.1:40000 "}, {"host": None}, {"host_count": 2}, {"origin": ""},
    {"origin": "null"},
])
def test_loopback_gate(change: dict[str, object]) -> None:
    assert verdict(dataclasses.replace(GOOD, **change)) == (403, "team_tools_forbidden")  # type: ignore[arg-type]


@pytest.mark.parametrize("authorization", [
    None, "", "Bearer", "Bearer ", f"bearer {TOKEN}", f"Basic {TOKEN}", f"Bearer  {TOKEN}",
    f"Bearer {TOKEN}x", f"Bearer {TOKEN[:-1]}", TOKEN, f"Bearer {TOKEN} ", "Bearer é",
])
def test_token_gate(authorization: str | None) -> None:
    req = dataclasses.replace(GOOD, authorization=authorization)
    assert verdict(req) == (401, "team_tools_unauthorized")


@pytest.mark.parametrize("method", ["GET", "PUT", "DELETE", "OPTIONS", "HEAD", "post"])
def test_post_only(method: str) -> None:
    assert verdict(dataclasses.replace(GOOD, method=method)) == (405, "method_not_allowed")


@pytest.mark.parametrize("content_type,ok", [
    ("application/json", True), ("application/json; charset=utf-8", True),
    ("Application/JSON", True), (None, False), ("", False), ("text/plain", False),
    ("application/json-patch+json", False), ("application/x-www-form-urlencoded", False),
])
def test_content_type_gate(content_type: str | None, ok: bool) -> None:
    out = verdict(dataclasses.replace(GOOD, content_type=content_type))
    assert (out == {}) if ok else (out == (415, "invalid_content_type"))


def test_size_limit_is_256_kib_declared_or_actual() -> None:
    limit = gates.MAX_BODY_BYTES
    fits = b'{"a":"' + b"x" * (limit - 8) + b'"}'
    assert len(fits) == limit
    assert verdict(dataclasses.replace(GOOD, body=fits, content_length=limit)) == {
        "a": "x" * (limit - 8)}
    over = fits[:-2] + b'x"}'
    assert verdict(dataclasses.replace(GOOD, body=over, content_length=None)) == (
        413, "team_tool_input_limit")
    assert verdict(dataclasses.replace(GOOD, content_length=limit + 1)) == (
        413, "team_tool_input_limit")


def _nested(depth: int) -> bytes:
    return ("{" + '"a":{' * (depth - 1) + "}" * depth).encode()


@pytest.mark.parametrize("body", [
    b"", b"{", b"[]", b'"x"', b"1", b"null", b"{}{}", b'{"a":NaN}', b'{"a":Infinity}',
    b"\xff{}", b"{'a':1}", _nested(31), b"[" * 100_000 + b"]" * 100_000,
    b'{"a":' + b"[" * 50_000 + b"]" * 50_000 + b"}",
])
def test_invalid_json_and_too_deep(body: bytes) -> None:
    out = verdict(dataclasses.replace(GOOD, body=body, content_length=len(body)))
    assert out == (400, "invalid_json")


def test_depth_30_is_allowed() -> None:
    out = verdict(dataclasses.replace(GOOD, body=_nested(30)))
    assert isinstance(out, dict)
    assert gates.depth_of(out) == 30


@given(st.recursive(st.none() | st.integers(), lambda c: st.lists(c, max_size=3)
                    | st.dictionaries(st.text(max_size=3), c, max_size=3), max_leaves=20))
def test_depth_of_matches_a_recursive_definition(value: object) -> None:
    def depth(v: object) -> int:
        if isinstance(v, dict):
            return 1 + max((depth(x) for x in v.values()), default=0)
        if isinstance(v, list):
            return 1 + max((depth(x) for x in v), default=0)
        return 0
    assert gates.depth_of(value) == depth(value)
    body = json.dumps({"v": value}).encode()
    out = verdict(dataclasses.replace(GOOD, body=body))
    assert out == {"v": value} if 1 + depth(value) <= gates.MAX_DEPTH else out == (400, "invalid_json")


def test_refusal_bodies_carry_code_and_message_only() -> None:
    refusal = gates.check_head(dataclasses.replace(GOOD, authorization="Bearer x"), CTX)
    assert refusal is not None
    assert refusal.body() == {"error": refusal.message, "code": "team_tools_unauthorized"}
    assert TOKEN not in json.dumps(refusal.body())
