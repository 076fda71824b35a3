"""callId dedupe, call validation, result envelopes, opaque ids."""
from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    consumes,
    initialize,
    invariant,
    rule,
)

from runner_ref.errors import CommandError, ServerError
from runner_ref.teamtools import call_book, call_rules, ids
from runner_ref.teamtools.call_book import CallBook
from runner_ref.teamtools.call_rules import Call, ListenerAnswer
from tests.budget import examples

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5)
    | st.floats(allow_nan=False, allow_infinity=False),
    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=4), c, max_size=3),
    max_leaves=10,
)
arguments = st.dictionaries(st.text(max_size=4), json_values, max_size=4)


def _reorder(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _reorder(value[k]) for k in reversed(list(value))}
    if isinstance(value, list):
        return [_reorder(v) for v in value]
    return value


pytestmark = pytest.mark.timeout(60)


# -- ids -------------------------------------------------------------------------------------
def test_opaque_ids_are_team_plus_32_hex_of_sha256() -> None:
    import hashlib
    expected = "team_" + hashlib.sha256(b"tok:yaoyao_workspace_create_member").hexdigest()[:32]
    assert ids.opaque_id("tok", "yaoyao_workspace_create_member") == expected


@given(st.text(min_size=1), st.text(min_size=1), st.lists(st.text(min_size=1), unique=True))
def test_opaque_ids_stable_per_token_and_distinct_across_tokens(
        t1: str, t2: str, real: list[str]) -> None:
    m1, again = ids.id_map(t1, real), ids.id_map(t1, real)
    assert m1 == again and sorted(m1.values()) == sorted(real)
    assert all(k.startswith("team_") and len(k) == 37 for k in m1)
    for r in real:
        if t1 != t2:
            assert ids.opaque_id(t1, r) != ids.opaque_id(t2, r)


# -- canonical JSON and validation -------------------------------------------------------------
@given(arguments)
def test_fingerprint_ignores_key_order_at_every_level(args: dict[str, Any]) -> None:
    assert Call("t", "c", args).fingerprint == Call("t", "c", _reorder(args)).fingerprint


def test_fingerprint_covers_tool_and_arguments() -> None:
    base = Call("t", "c", {"a": 1})
    assert base.fingerprint != Call("u", "c", {"a": 1}).fingerprint
    assert base.fingerprint != Call("t", "c", {"a": 2}).fingerprint
    assert base.fingerprint == Call("t", "other", {"a": 1}).fingerprint
    assert call_rules.canonical_json({"b": {"d": 1, "c": 2}, "a": []}) == '{"a":[],"b":{"c":2,"d":1}}'


@pytest.mark.parametrize("body,ok", [
    ({"toolId": "t" * 100, "callId": "c" * 200, "arguments": {}}, True),
    ({"toolId": "t" * 101, "callId": "c", "arguments": {}}, False),
    ({"toolId": "t", "callId": "c" * 201, "arguments": {}}, False),
    ({"toolId": "", "callId": "c", "arguments": {}}, False),
    ({"toolId": "t", "callId": "", "arguments": {}}, False),
    ({"toolId": "t", "callId": "c", "arguments": []}, False),
    ({"toolId": "t", "callId": "c"}, False),
    ({"toolId": 1, "callId": "c", "arguments": {}}, False),
    ({"toolId": "t", "callId": 7, "arguments": {}}, False),
])
def test_parse_call_bounds(body: dict[str, Any], ok: bool) -> None:
    out = call_rules.parse_call(body)
    if ok:
        assert isinstance(out, Call)
    else:
        assert isinstance(out, ListenerAnswer) and (out.status, out.body["code"]) == (400, "invalid_tool_call")


# -- result envelopes --------------------------------------------------------------------------
def test_content_arrays_pass_through_unchanged() -> None:
    value = {"content": [{"type": "text", "text": "hi"}], "isError": False, "extra": 1}
    assert call_rules.wrap_result(value) is value


@pytest.mark.parametrize("value", [
    {"member": {"id": "m1"}}, {"content": "not a list"}, "text", 3, None, [1, 2], {"content": None},
])
def test_other_results_are_wrapped(value: Any) -> None:
    wrapped = call_rules.wrap_result(value)
    assert wrapped == {"content": [{"type": "text", "text": json.dumps(value)}],
                       "structuredContent": value}


def test_failures_are_is_error_envelopes_that_hide_uncoded_text() -> None:
    server = call_book.failure_of(ServerError(410, "runner_lease_expired", "lease gone"))
    assert server["isError"] is True
    assert json.loads(server["content"][0]["text"]) == {"error": "lease gone",
                                                         "code": "runner_lease_expired"}
    cmd = call_book.failure_of(CommandError("x_code", "x message"))
    assert json.loads(cmd["content"][0]["text"])["code"] == "x_code"
    other = call_book.failure_of(RuntimeError("secret-token-abc"))
    assert "secret-token-abc" not in json.dumps(other)
    assert json.loads(other["content"][0]["text"]) == {"error": "team tool call failed",
                                                        "code": "runner_error"}


# -- dedupe -----------------------------------------------------------------------------------
class Counter:
    def __init__(self, result: Any = None) -> None:
        self.runs: list[str] = []
        self.result = result
        self.gate: asyncio.Event | None = None
        self.fail: Exception | None = None

    def execute(self, call: Call) -> Any:
        async def run() -> Any:
            self.runs.append(call.call_id)
            if self.gate is not None:
                await self.gate.wait()
            if self.fail is not None:
                raise self.fail
            return self.result if self.result is not None else {"echo": call.arguments}
        return run


async def test_a_repeat_while_the_first_runs_shares_its_result() -> None:
    book, counter = CallBook(), Counter()
    counter.gate = asyncio.Event()
    call = Call("t", "c1", {"x": 1, "y": {"b": 2, "a": 1}})
    same = Call("t", "c1", {"y": {"a": 1, "b": 2}, "x": 1})
    first = asyncio.ensure_future(book.run(call, counter.execute(call)))
    second = asyncio.ensure_future(book.run(same, counter.execute(same)))
    await book.until_waiting("c1", 2)  # both callers are now waiting on the one running call
    conflict = await book.run(Call("t", "c1", {"x": 2}), counter.execute(call))
    assert (conflict.status, conflict.body["code"]) == (409, "idempotency_conflict")
    counter.gate.set()
    a, b = await asyncio.gather(first, second)
    assert a == b and a.status == 200 and counter.runs == ["c1"]
    assert a.body["structuredContent"] == {"echo": call.arguments}


async def test_a_failed_call_is_shared_too() -> None:
    book, counter = CallBook(), Counter()
    counter.fail = ServerError(500, "boom", "server broke")
    call = Call("t", "c", {})
    a = await book.run(call, counter.execute(call))
    b = await book.run(call, counter.execute(call))
    assert a == b and a.body["isError"] is True and counter.runs == ["c"]


async def test_a_caller_going_away_does_not_cancel_the_shared_call() -> None:
    book, counter = CallBook(), Counter()
    counter.gate = asyncio.Event()
    call = Call("t", "c", {})
    first = asyncio.ensure_future(book.run(call, counter.execute(call)))
    await book.until_waiting("c", 1)
    first.cancel()
    counter.gate.set()
    again = await book.run(call, counter.execute(call))
    assert again.status == 200 and "isError" not in again.body and counter.runs == ["c"]


async def test_129th_distinct_call_is_refused_but_repeats_still_answer() -> None:
    book, counter = CallBook(), Counter()
    for i in range(128):
        c = Call("t", f"c{i}", {"i": i})
        assert (await book.run(c, counter.execute(c))).status == 200
    extra = Call("t", "c128", {})
    refused = await book.run(extra, counter.execute(extra))
    assert (refused.status, refused.body["code"]) == (429, "team_tool_call_limit")
    repeat = Call("t", "c5", {"i": 5})
    assert (await book.run(repeat, counter.execute(repeat))).status == 200
    assert len(counter.runs) == 128 and len(book) == 128


async def test_cancel_all_answers_waiters_with_is_error() -> None:
    book, counter = CallBook(), Counter()
    counter.gate = asyncio.Event()
    call = Call("t", "c", {})
    waiter = asyncio.ensure_future(book.run(call, counter.execute(call)))
    await book.until_waiting("c", 1)
    await book.cancel_all()
    out = await waiter
    assert out.status == 200 and out.body["isError"] is True


class DedupeMachine(RuleBasedStateMachine):
    """CallBook against a dictionary model: one execution per accepted callId, shared outcomes."""

    ids = Bundle("ids")

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.book = CallBook(limit=5)
        self.counter = Counter()
        self.model: dict[str, str] = {}
        self.outcomes: dict[str, ListenerAnswer] = {}

    def teardown(self) -> None:
        self.loop.close()

    def _run(self, call: Call) -> ListenerAnswer:
        return self.loop.run_until_complete(self.book.run(call, self.counter.execute(call)))

    @initialize()
    def start(self) -> None:
        pass

    @rule(target=ids, call_id=st.text(min_size=1, max_size=3), tool=st.sampled_from(["a", "b"]),
          args=arguments)
    def call(self, call_id: str, tool: str, args: dict[str, Any]) -> tuple[str, str, Any]:
        c = Call(tool, call_id, args)
        out = self._run(c)
        known = self.model.get(call_id)
        if known is None and len(self.model) >= 5:
            assert (out.status, out.body["code"]) == (429, "team_tool_call_limit")
        elif known is None or known == c.fingerprint:
            self.model.setdefault(call_id, c.fingerprint)
            self.outcomes.setdefault(call_id, out)
            assert out == self.outcomes[call_id]
        else:
            assert (out.status, out.body["code"]) == (409, "idempotency_conflict")
        return (call_id, tool, args)

    @rule(prior=ids)
    def repeat_reordered(self, prior: tuple[str, str, Any]) -> None:
        call_id, tool, args = prior
        c = Call(tool, call_id, _reorder(args))
        out = self._run(c)
        if self.model.get(call_id) == c.fingerprint:
            assert out == self.outcomes[call_id]

    @rule(prior=consumes(ids), other=arguments)
    def conflict(self, prior: tuple[str, str, Any], other: dict[str, Any]) -> None:
        call_id, tool, args = prior
        c = Call(tool, call_id, {**other, "__different__": True})
        if call_id in self.model:
            out = self._run(c)
            assert (out.status, out.body["code"]) == (409, "idempotency_conflict")

    @invariant()
    def one_execution_per_accepted_call_id(self) -> None:
        assert sorted(self.counter.runs) == sorted(self.model)
        assert len(self.book) == len(self.model) <= 5


TestDedupeMachine = DedupeMachine.TestCase
# Generating nested JSON arguments is the cost (no I/O): sized by the budget like the other
# expensive machines (tests/budget.py), the full count under the thorough profile.
TestDedupeMachine.settings = settings(stateful_step_count=25, max_examples=examples(ci=20))
