"""Command fingerprints: sha256 hex of ``JSON.stringify`` of the command as received.

Rules:
- The fingerprint covers the whole command object ``{id, kind, payload, expiresAt}`` as a
  JavaScript runner sees it after ``JSON.parse``, serialized as V8's ``JSON.stringify`` does, so
  the two agree byte for byte (``tests/runner_ref/test_fingerprint_node.py`` compares with node):
- Key order is V8's own-property order: integer-like keys (array indices: ``"0"``, ``"42"``, no
  leading zero, up to ``2**32 - 2``) first, in ascending numeric order; then every other key in
  the order it arrived (``json.loads`` keeps it; a repeated key keeps its first place, its last
  value, as ``JSON.parse`` does).
- Numbers are JavaScript numbers: an integer is the double nearest to it (so
  ``12345678901234567890`` is written ``12345678901234567000``), written as
  ``Number.prototype.toString`` does: integral values without ``.0``, shortest round-trip digits,
  exponents only from 1e21 up and below 1e-6; ``-0`` is ``0``; non-finite is ``null``.
- Strings: no spaces, non-ASCII kept as UTF-8, control characters as ``\\u00xx`` (short escapes
  for ``\\b \\f \\n \\r \\t``), lone surrogates escaped.
The same serialization is written independently in fake_server on purpose
(``fake_server/tool_calls.py`` has its own copy, ``js_json_stringify``): the oracle and the
reference runner share no code.
"""
from __future__ import annotations

import hashlib
import math
import re
from decimal import Decimal
from typing import Any

_SHORT = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


_PLAIN = re.compile(r'[^"\\\x00-\x1f\ud800-\udfff]*\Z')


def _string(s: str) -> str:
    if _PLAIN.match(s):  # fast path: nothing to escape
        return '"' + s + '"'
    out = ['"']
    for ch in s:
        code = ord(ch)
        if ch in _SHORT:
            out.append(_SHORT[ch])
        elif code < 0x20 or 0xD800 <= code <= 0xDFFF:
            out.append(f"\\u{code:04x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


_EXACT = 2**53   # integers below this are exact doubles, and print as themselves


def _number(x: int | float) -> str:
    if isinstance(x, bool):
        return "true" if x else "false"
    if isinstance(x, int):
        if abs(x) < _EXACT:
            return str(x)
        try:
            x = float(x)   # the double JSON.parse makes of it (round to nearest)
        except OverflowError:
            return "null"  # beyond the largest double: Infinity, which stringifies as null
    if not math.isfinite(x):
        return "null"
    if x == 0:
        return "0"
    if x.is_integer() and abs(x) < _EXACT:
        return str(int(x))
    # ECMAScript Number::toString: the shortest round-trip digits (Python's repr finds the same
    # ones), value = 0.digits × 10**n, laid out by the magnitude of n
    sign = "-" if x < 0 else ""
    t = Decimal(repr(abs(x))).normalize().as_tuple()
    digits = "".join(map(str, t.digits))
    k = len(digits)
    n = int(t.exponent) + k
    if k <= n <= 21:
        return sign + digits + "0" * (n - k)
    if 0 < n <= 21:
        return sign + digits[:n] + "." + digits[n:]
    if -6 < n <= 0:
        return sign + "0." + "0" * (-n) + digits
    e = n - 1
    mant = digits if k == 1 else digits[0] + "." + digits[1:]
    return f"{sign}{mant}e{'+' if e > 0 else '-'}{abs(e)}"


_INDEX = re.compile(r"(?:0|[1-9][0-9]{0,9})\Z")
_MAX_INDEX = 2**32 - 2   # ECMAScript array index: ToString(ToUint32(P)) == P and P != 2**32 - 1


def _is_array_index(key: str) -> bool:
    """An integer-like key V8 lists first (canonical decimal, 0 … 2**32 - 2)."""
    return _INDEX.match(key) is not None and int(key) <= _MAX_INDEX


class _Text(str):
    """Text already serialized, waiting on the work stack (a plain ``str`` there is a value)."""


def _scalar(value: Any) -> str:
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, int | float):
        return _number(value)
    raise TypeError(f"not JSON: {type(value).__name__}")


def js_stringify(value: Any) -> str:
    """Serialize like ECMAScript ``JSON.stringify`` (no indentation).

    A work stack instead of recursion, so any depth ``json.loads`` accepts is serialized (V8
    accepts those depths too)."""
    out: list[str] = []
    todo: list[Any] = [value]
    while todo:
        item = todo.pop()
        if type(item) is _Text:
            out.append(item)
            continue
        if isinstance(item, list | tuple):
            parts: list[Any] = [_Text("[")]
            for i, v in enumerate(item):
                parts += [_Text(","), v] if i else [v]
            parts.append(_Text("]"))
        elif isinstance(item, dict):
            keys = [str(k) for k in item]
            index = sorted((k for k in keys if _is_array_index(k)), key=int)
            order = index + [k for k in keys if not _is_array_index(k)] if index else keys
            items = {str(k): v for k, v in item.items()}
            parts = [_Text("{")]
            for i, k in enumerate(order):
                parts += [_Text(("," if i else "") + _string(k) + ":"), items[k]]
            parts.append(_Text("}"))
        else:
            out.append(_scalar(item))
            continue
        todo.extend(reversed(parts))
    return "".join(out)


def command_fingerprint(command: dict[str, Any]) -> str:
    """sha256 hex of the command exactly as received."""
    return hashlib.sha256(js_stringify(command).encode("utf-8", "surrogatepass")).hexdigest()
