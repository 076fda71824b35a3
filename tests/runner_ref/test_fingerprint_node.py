"""Differential: ``runner_ref.fingerprint.js_stringify`` against V8's real ``JSON.stringify``.

The runner hashes a command the way a JavaScript runner does: ``JSON.stringify(JSON.parse(text))``.
Each generated JSON value is written as text once; node parses and stringifies that text, the
runner's serializer does the same to ``json.loads`` of it, and the bytes must be equal. Inputs
lean on what differs between Python and V8: integer-like keys (V8 lists array indices first, in
ascending order), integers past 2**53 (JavaScript numbers are doubles), exponents, ``-0`` and lone
surrogates. One long-lived ``node`` answers every example (a line in, base64 of UTF-8 out).
"""
from __future__ import annotations

import base64
import json
import shutil
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from runner_ref.fingerprint import command_fingerprint, js_stringify

NODE = shutil.which("node")
pytestmark = pytest.mark.skipif(NODE is None, reason="node not installed")

_SCRIPT = r"""
const rl = require('readline').createInterface({input: process.stdin});
rl.on('line', (line) => {
  const text = JSON.stringify(JSON.parse(line));
  process.stdout.write(Buffer.from(text, 'utf8').toString('base64') + '\n');
});
"""


class Node:
    def __init__(self) -> None:
        assert NODE is not None
        self.proc = subprocess.Popen([NODE, "-e", _SCRIPT], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE)

    def stringify(self, text: str) -> bytes:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(text.encode("ascii") + b"\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        assert line, "node exited"
        return base64.b64decode(line)

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait(timeout=10)


@pytest.fixture(scope="module")
def node() -> Iterator[Node]:
    n = Node()
    yield n
    n.close()


INTEGER_LIKE = ["0", "1", "2", "9", "10", "42", "007", "01", "-1", "-0", "1.5", "1e3", " 1", "+1",
                "4294967294", "4294967295", "4294967296", "9007199254740993", "__proto__"]
keys = st.one_of(st.sampled_from(INTEGER_LIKE), st.integers(0, 2**33).map(str),
                 st.text(st.characters(codec="utf-8"), max_size=4))
scalars = st.one_of(
    st.none(), st.booleans(),
    st.integers(-2**70, 2**70), st.sampled_from([2**53 - 1, 2**53, 2**53 + 1, 10**21, 10**21 - 1]),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(st.characters(exclude_categories=()), max_size=8),   # lone surrogates included
)
values = st.recursive(scalars, lambda kids: st.one_of(
    st.lists(kids, max_size=4), st.dictionaries(keys, kids, max_size=6)), max_leaves=20)


def _runner_bytes(text: str) -> bytes:
    return js_stringify(json.loads(text)).encode("utf-8", "surrogatepass")


@given(value=values)
@example(value={"b": 1, "1": 2})                                 # the divergence that was there
@example(value={"b": 1, "4294967295": 2, "4294967294": 3, "01": 4, "1": 5, "0": 6})
@example(value={"x": 12345678901234567890, "y": [1e21, 1e-7, -0.0, 5e-324, 1e16, 2.0**60]})
def test_js_stringify_matches_node(node: Node, value: Any) -> None:
    text = json.dumps(value)          # ASCII, lone surrogates as \udxxx escapes
    assert _runner_bytes(text) == node.stringify(text), text


def test_repeated_keys_keep_first_place_last_value(node: Node) -> None:
    text = '{"a":1,"2":0,"b":2,"a":3,"1":9,"2":5}'
    assert _runner_bytes(text) == node.stringify(text) == b'{"1":9,"2":5,"a":3,"b":2}'


def test_fingerprint_is_sha256_of_the_v8_text(node: Node) -> None:
    import hashlib
    text = '{"id":"c1","kind":"http","payload":{"b":1,"10":2,"9":3},"expiresAt":1e3}'
    assert command_fingerprint(json.loads(text)) == hashlib.sha256(node.stringify(text)).hexdigest()
