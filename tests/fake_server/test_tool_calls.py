"""Unit tests of the tool relay dedupe and of the JavaScript JSON.stringify replica."""
from __future__ import annotations

import hashlib
import json
import uuid
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fake_server.tool_calls import (
    Decision,
    LeaseCalls,
    ToolRequest,
    fingerprint,
    js_json_stringify,
    js_number,
    parse_tool_body,
)

LEASE = str(uuid.uuid4())


# -- JSON.stringify: numbers (expected values are what V8 prints) ---------------------------
@pytest.mark.parametrize(
    ("text", "js"),
    [
        ("1.0", "1"),
        ("1", "1"),
        ("-0", "0"),
        ("-0.0", "0"),
        ("0.1", "0.1"),
        ("1e-7", "1e-7"),
        ("1e-6", "0.000001"),
        ("0.000001234", "0.000001234"),
        ("123e-20", "1.23e-18"),
        ("1e21", "1e+21"),
        ("1e20", "100000000000000000000"),
        ("1000000000000000000000", "1e+21"),
        ("123456789012345678901", "123456789012345680000"),
        ("9007199254740993", "9007199254740992"),
        ("12345678901234567890", "12345678901234567000"),
        ("1.5e300", "1.5e+300"),
        ("-1.5", "-1.5"),
        ("4.35", "4.35"),
        ("0.30000000000000004", "0.30000000000000004"),
        ("5e-324", "5e-324"),
        ("1.7976931348623157e308", "1.7976931348623157e+308"),
        ("1e400", "null"),
        ("-1e400", "null"),
        ("2e-7", "2e-7"),
        ("1.25e-7", "1.25e-7"),
        ("100", "100"),
        ("1E2", "100"),
        ("123.456", "123.456"),
    ],
)
def test_numbers_print_like_javascript(text: str, js: str) -> None:
    assert js_json_stringify(json.loads(text)) == js


def test_integers_beyond_double_range_become_null() -> None:
    assert js_number(10**400) == "null"
    assert js_number(-(10**400)) == "null"


# -- JSON.stringify: strings ----------------------------------------------------------------
@pytest.mark.parametrize(
    ("value", "js"),
    [
        ("plain", '"plain"'),
        ('q"b\\', '"q\\"b\\\\"'),
        ("\b\f\n\r\t", '"\\b\\f\\n\\r\\t"'),
        ("\x00\x01\x1f", '"\\u0000\\u0001\\u001f"'),
        ("\x7f", '"\x7f"'),
        ("\u2028\u2029", '"\u2028\u2029"'),
        ("/<>&'", "\"/<>&'\""),
        ("héllo 中文", '"héllo 中文"'),
        ("\U0001F600", '"\U0001F600"'),
        ("\ud83d\ude00", '"\U0001F600"'),       # a surrogate pair held as two code points
        ("\ud800", '"\\ud800"'),                 # lone high surrogate
        ("\udc00x", '"\\udc00x"'),               # lone low surrogate
        ("\ud83dx", '"\\ud83dx"'),
        ("\ude00\ud83d", '"\\ude00\\ud83d"'),   # reversed pair is two lone surrogates
        ("\uDBFF", '"\\udbff"'),                 # lowercase hex
    ],
)
def test_strings_escape_like_javascript(value: str, js: str) -> None:
    assert js_json_stringify(value) == js


def test_lone_surrogate_from_json_text() -> None:
    assert js_json_stringify(json.loads('"\\ud800"')) == '"\\ud800"'
    assert js_json_stringify(json.loads('"\\ud83d\\ude00"')) == '"\U0001F600"'


# -- JSON.stringify: structure ---------------------------------------------------------------
def test_no_spaces_and_literals() -> None:
    assert js_json_stringify({"a": [1, True, False, None, {}, []]}) == (
        '{"a":[1,true,false,null,{},[]]}')


def test_key_order_is_as_received_except_array_indices_first() -> None:
    obj = json.loads('{"b":1,"a":2,"1":3,"0":4,"01":5,"4294967295":6,"4294967294":7,"-1":8,'
                     '"1.5":9,"10":10}')
    assert js_json_stringify(obj) == (
        '{"0":4,"1":3,"10":10,"4294967294":7,"b":1,"a":2,"01":5,"4294967295":6,"-1":8,"1.5":9}')


def test_duplicate_keys_keep_first_position_and_last_value_like_json_parse() -> None:
    assert js_json_stringify(json.loads('{"a":1,"b":2,"a":3}')) == '{"a":3,"b":2}'


def test_non_ascii_digit_keys_are_not_indices() -> None:
    assert js_json_stringify({"b": 1, "\u0661": 2, "2": 3}) == '{"2":3,"b":1,"\u0661":2}'


def test_deep_nesting_does_not_overflow() -> None:
    deep: Any = 0
    for _ in range(50_000):
        deep = [deep]
    assert js_json_stringify(deep) == "[" * 50_000 + "0" + "]" * 50_000


def test_non_json_types_raise_type_error() -> None:
    with pytest.raises(TypeError):
        js_json_stringify({"a": {1, 2}})
    with pytest.raises(TypeError):
        js_json_stringify({1: "x"})


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53)
    | st.text(alphabet=st.characters(codec="utf-8"), max_size=8),
    lambda kids: st.lists(kids, max_size=4)
    | st.dictionaries(st.text(alphabet="abcxyz", min_size=1, max_size=3), kids, max_size=4),
    max_leaves=20,
)


@given(json_values)
def test_agrees_with_python_json_on_plain_values(value: Any) -> None:
    """Without floats, index-like keys or escapes that differ, JS and Python agree."""
    expected = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    # Python escapes U+007F-free control chars identically except that it uses \\uXXXX for
    # \\b and \\f too; normalise those two.
    expected = expected.replace("\\u0008", "\\b").replace("\\u000c", "\\f")
    assert js_json_stringify(value) == expected
    assert json.loads(js_json_stringify(value)) == value


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_numbers_round_trip(x: float) -> None:
    assert float(js_number(x)) == x or x == 0


def test_fingerprint_is_sha256_of_stringified_pair() -> None:
    assert fingerprint("t", {"a": 1.0, "b": "é"}) == hashlib.sha256(
        '["t",{"a":1,"b":"é"}]'.encode()).hexdigest()
    assert fingerprint("t", {"a": 1, "b": 2}) != fingerprint("t", {"b": 2, "a": 1})


# -- body shape ------------------------------------------------------------------------------
GOOD = {"leaseId": LEASE, "toolId": "create_member", "callId": "c1", "arguments": {"x": 1}}


def test_good_body_parses() -> None:
    assert parse_tool_body(GOOD) == ToolRequest(LEASE, "create_member", "c1", {"x": 1})
    assert isinstance(parse_tool_body(GOOD | {"leaseId": LEASE.upper()}), ToolRequest)


@pytest.mark.parametrize(
    "body",
    [
        None, [], "x", {},
        GOOD | {"extra": 1},
        {k: v for k, v in GOOD.items() if k != "arguments"},
        GOOD | {"leaseId": "lease-1"},
        GOOD | {"leaseId": 1},
        GOOD | {"toolId": ""},
        GOOD | {"toolId": "t" * 101},
        GOOD | {"toolId": "\U0001F600" * 51},  # 102 UTF-16 code units
        GOOD | {"callId": ""},
        GOOD | {"callId": "c" * 201},
        GOOD | {"callId": 5},
        GOOD | {"arguments": []},
        GOOD | {"arguments": None},
        GOOD | {"arguments": "{}"},
    ],
)
def test_bad_body_is_400_invalid_workspace_request(body: object) -> None:
    d = parse_tool_body(body)
    assert isinstance(d, Decision)
    assert (d.action, d.status, d.code) == ("reject", 400, "invalid_workspace_request")
    assert d.body == {"error": d.message, "code": "invalid_workspace_request"}


def test_length_bounds_are_inclusive() -> None:
    ok = GOOD | {"toolId": "t" * 100, "callId": "c" * 200}
    assert isinstance(parse_tool_body(ok), ToolRequest)


# -- dedupe ----------------------------------------------------------------------------------
def test_first_call_runs_repeat_joins_and_shares_the_result() -> None:
    calls = LeaseCalls()
    first = calls.begin("c1", "t", {"a": 1})
    assert (first.action, first.status, first.done) == ("run", 200, False)
    running = calls.begin("c1", "t", {"a": 1})
    assert running.action == "join" and not running.done and running.record is first.record
    calls.finish("c1", {"result": 42})
    again = calls.begin("c1", "t", {"a": 1.0})  # same JSON text → same fingerprint
    assert again.action == "join" and again.done and again.record is not None
    assert again.record.outcome == {"result": 42}
    assert calls.executions["c1"] == 1 and calls.total_executions == 1


def test_finish_keeps_the_first_outcome() -> None:
    calls = LeaseCalls()
    calls.begin("c1", "t", {})
    calls.finish("c1", "first")
    assert calls.finish("c1", "second").outcome == "first"


def test_same_call_id_other_fingerprint_conflicts() -> None:
    calls = LeaseCalls()
    calls.begin("c1", "t", {"a": 1, "b": 2})
    for tool, args in [("t", {"a": 2, "b": 2}), ("u", {"a": 1, "b": 2}),
                       ("t", {"b": 2, "a": 1})]:
        d = calls.begin("c1", tool, args)
        assert (d.action, d.status, d.code) == ("reject", 409, "idempotency_conflict")
    assert calls.total_executions == 1


def test_129th_distinct_call_id_is_refused_but_repeats_still_join() -> None:
    calls = LeaseCalls()
    for i in range(128):
        assert calls.begin(f"c{i}", "t", {}).action == "run"
    d = calls.begin("c128", "t", {})
    assert (d.action, d.status, d.code) == ("reject", 429, "runner_call_limit")
    assert d.body == {"error": d.message, "code": "runner_call_limit"}
    assert calls.begin("c5", "t", {}).action == "join"
    assert calls.begin("c5", "t", {"x": 1}).code == "idempotency_conflict"
    assert calls.total_executions == 128


@given(st.lists(st.tuples(st.sampled_from(["a", "b", "c", "d"]), st.sampled_from(["t", "u"]),
                          st.integers(0, 2)), max_size=30))
def test_each_call_id_runs_at_most_once(script: list[tuple[str, str, int]]) -> None:
    calls = LeaseCalls(limit=3)
    first: dict[str, tuple[str, int]] = {}
    for call_id, tool, arg in script:
        d = calls.begin(call_id, tool, {"v": arg})
        if call_id in first:
            expected = "join" if first[call_id] == (tool, arg) else "reject"
            assert d.action == expected
        elif len(first) >= 3:
            assert d.code == "runner_call_limit"
        else:
            assert d.action == "run"
            first[call_id] = (tool, arg)
    assert all(n == 1 for n in calls.executions.values())
    assert set(calls.executions) == set(first)


# -- differential check against real V8, when node is installed -----------------------------
def _random_json_text(rng: Any, depth: int = 0) -> str:
    """A random JSON text rich in the cases where JS and Python differ."""
    pick = rng.random()
    if depth > 3 or pick < 0.45:
        atoms = [
            lambda: repr(rng.uniform(-1e6, 1e6)),
            lambda: f"{rng.randint(1, 9)}e{rng.randint(-330, 330)}",
            lambda: f"{rng.choice(['', '-'])}{rng.randint(0, 10**rng.randint(1, 30))}",
            lambda: f"{rng.random():.{rng.randint(1, 20)}f}",
            lambda: rng.choice(["true", "false", "null", "-0", "0.0", "1.0", "1e21", "1e-7"]),
            lambda: _random_json_string(rng),
        ]
        return str(rng.choice(atoms)())
    if pick < 0.7:
        items = [_random_json_text(rng, depth + 1) for _ in range(rng.randint(0, 4))]
        return "[" + ",".join(items) + "]"
    keys = ['"' + str(rng.choice([rng.randint(0, 20), 4294967294, 4294967295, "01", "-1", "a",
                                  "b", "z", "1.5", "\\u00e9"])) + '"'
            for _ in range(rng.randint(0, 5))]
    return "{" + ",".join(f"{k}:{_random_json_text(rng, depth + 1)}" for k in keys) + "}"


def _random_json_string(rng: Any) -> str:
    parts = ['"']
    for _ in range(rng.randint(0, 6)):
        parts.append(rng.choice([
            "a", "\\n", "\\u0000", "\\u001f", "\\u007f", "\\u2028", "\\u2029", "\\ud800",
            "\\udfff", "\\ud83d\\ude00", "\\ud83d", "é", "中", "\U0001F600", "\\\\", '\\"',
            "\\/", "\\b", "\\f", "\\t", "\\r", "<", "\\u00ff",
        ]))
    parts.append('"')
    return "".join(parts)


def test_differential_against_node_json_stringify() -> None:
    import random
    import shutil
    import subprocess

    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed")
    import os

    seed = int(os.environ.get("JS_DIFF_SEED") or random.randrange(2**32))
    print(f"differential seed={seed} (replay: JS_DIFF_SEED={seed})")
    rng = random.Random(seed)
    texts = [_random_json_text(rng) for _ in range(400)]
    script = (
        "const lines=require('fs').readFileSync(0,'utf8').split('\\n').filter(Boolean);"
        "for (const l of lines) process.stdout.write(JSON.stringify(JSON.stringify("
        "JSON.parse(JSON.parse(l))))+'\\n');"
    )
    stdin = "\n".join(json.dumps(t) for t in texts) + "\n"
    out = subprocess.run([node, "-e", script], input=stdin.encode(), capture_output=True,
                         timeout=30, check=True).stdout.decode().split("\n")[:-1]
    assert len(out) == len(texts)
    for text, line in zip(texts, out, strict=True):
        expected = json.loads(line)
        assert js_json_stringify(json.loads(text)) == expected, (seed, text)
