"""Command fingerprints: sha256 hex of ``JSON.stringify`` of the command as received.

Rules:
- The fingerprint covers the whole command object ``{id, kind, payload, expiresAt}`` with its
  keys in the order they arrived (``json.loads`` keeps order) — exactly what a JavaScript
  runner hashes, so the two agree byte for byte.
- Serialization follows ECMAScript ``JSON.stringify``: no spaces, non-ASCII kept as UTF-8,
  control characters as ``\\u00xx`` (short escapes for ``\\b \\f \\n \\r \\t``), lone surrogates
  escaped, integral floats without ``.0``, exponents only from 1e21 up and below 1e-6.
"""
from __future__ import annotations

import hashlib
import math
import re
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


def _number(x: int | float) -> str:
    if isinstance(x, bool):
        return "true" if x else "false"
    if isinstance(x, int):
        if abs(x) < 10**21:
            return str(x)
        x = float(x)
    if not math.isfinite(x):
        return "null"
    if x == 0:
        return "0"
    if x.is_integer() and abs(x) < 1e21:
        return str(int(x))
    r = repr(x)
    if "e" not in r:
        return r
    mant, exp = r.split("e")
    e = int(exp)
    if -7 < e < 21:  # JS writes these positionally
        digits = mant.replace(".", "").lstrip("-")
        sign = "-" if x < 0 else ""
        point = 1 + e
        if point <= 0:
            return sign + "0." + "0" * (-point) + digits
        return sign + digits + "0" * max(0, point - len(digits))
    return f"{mant}e{'+' if e > 0 else '-'}{abs(e)}"


def js_stringify(value: Any) -> str:
    """Serialize like ECMAScript ``JSON.stringify`` (no indentation)."""
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
    if isinstance(value, list | tuple):
        return "[" + ",".join(js_stringify(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(_string(str(k)) + ":" + js_stringify(v) for k, v in value.items()) + "}"
    raise TypeError(f"not JSON: {type(value).__name__}")


def command_fingerprint(command: dict[str, Any]) -> str:
    """sha256 hex of the command exactly as received."""
    return hashlib.sha256(js_stringify(command).encode("utf-8", "surrogatepass")).hexdigest()
