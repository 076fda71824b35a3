"""Differential: the two ``JSON.stringify`` replicas against each other and against V8.

``fake_server/tool_calls.py`` (``js_json_stringify``, the hub's tool-call fingerprint) and
``runner_ref/fingerprint.py`` (``js_stringify``, the ledger's command fingerprint) are written
independently on purpose; both claim V8's bytes. Each generated JSON value is written as text
once; node does ``JSON.stringify(JSON.parse(text))``, each replica serializes ``json.loads(text)``,
and the three byte strings must be equal. Inputs lean on where Python and V8 differ:
integer-like keys, integers past 2**53, exponents, ``-0``, unicode (lone surrogates included)
and nesting.

Found: the runner's replica recursed once per level through a generator, so a payload nested
a few hundred levels deep (which ``json.loads`` and V8 accept) raised ``RecursionError`` and the
runner answered ``runner_error``; it is now iterative (``test_deep_nesting``).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from hypothesis import example, given
from hypothesis import strategies as st

from fake_server.tool_calls import fingerprint as tool_fingerprint
from fake_server.tool_calls import js_json_stringify
from runner_ref.fingerprint import command_fingerprint, js_stringify

from .node import Node

INTEGER_LIKE = ["0", "1", "2", "9", "10", "42", "007", "01", "-1", "-0", "1.5", "1e3", " 1", "+1",
                "4294967294", "4294967295", "4294967296", "9007199254740993", "__proto__", "٣"]
keys = st.one_of(st.sampled_from(INTEGER_LIKE), st.integers(0, 2**33).map(str),
                 st.text(st.characters(codec="utf-8"), max_size=4))
scalars = st.one_of(
    st.none(), st.booleans(),
    st.integers(-2**70, 2**70), st.sampled_from([2**53 - 1, 2**53, 2**53 + 1, 10**21, 10**21 - 1,
                                                 10**400]),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(st.characters(exclude_categories=()), max_size=8),   # lone surrogates included
)
values = st.recursive(scalars, lambda kids: st.one_of(
    st.lists(kids, max_size=4), st.dictionaries(keys, kids, max_size=6)), max_leaves=20)


def _bytes(text: str) -> tuple[bytes, bytes]:
    value = json.loads(text)
    return (js_json_stringify(value).encode("utf-8", "surrogatepass"),
            js_stringify(value).encode("utf-8", "surrogatepass"))


@given(value=values)
@example(value={"b": 1, "1": 2})                                # the divergence of issue 8
@example(value={"b": 1, "4294967295": 2, "4294967294": 3, "01": 4, "1": 5, "0": 6})
@example(value={"x": 12345678901234567890, "y": [1e21, 1e-7, -0.0, 5e-324, 1e16, 2.0**60]})
@example(value=["\ud83d\ude00", "\ud83d", "\ude00x", "\u2028\u0000\x7f"])
def test_the_replicas_and_v8_agree(node: Node, value: Any) -> None:
    text = json.dumps(value)          # ASCII, lone surrogates as \udxxx escapes
    server, runner = _bytes(text)
    assert server == runner == node.stringify(text), text


def test_repeated_keys_keep_first_place_last_value(node: Node) -> None:
    text = '{"a":1,"2":0,"b":2,"a":3,"1":9,"2":5}'
    assert _bytes(text) == (node.stringify(text),) * 2


def test_deep_nesting(node: Node) -> None:
    for depth in (150, 300, 450):   # levels: twice that; json.loads stops near 1000
        text = '{"a":[' * depth + "1" + "]}" * depth
        assert _bytes(text) == (node.stringify(text),) * 2, depth


def test_both_fingerprints_hash_the_v8_text(node: Node) -> None:
    command = '{"id":"c1","kind":"http","payload":{"b":1,"10":2,"9":3},"expiresAt":1e3}'
    assert command_fingerprint(json.loads(command)) == hashlib.sha256(
        node.stringify(command)).hexdigest()
    args = '{"q":"\\u00e9","2":[1.0,-0.0],"1":null}'
    pair = f'["tool-1",{args}]'
    assert tool_fingerprint("tool-1", json.loads(args)) == hashlib.sha256(
        node.stringify(pair)).hexdigest()
