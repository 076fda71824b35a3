"""JavaScript's view of text, where the runner must agree with a JavaScript runner.

Rules:
- ``js_trim`` is ``String.prototype.trim``: it strips ECMAScript WhiteSpace and LineTerminator
  (TAB, VT, FF, SP, NBSP, ZWNBSP/BOM, the Zs category, LF, CR, LS, PS) and nothing else. Python's
  ``str.strip()`` differs: it also strips U+001C–U+001F and U+0085, and keeps U+FEFF.
- ``js_length`` is ``String.prototype.length``: UTF-16 code units.
fake_server keeps its own copy on purpose (``fake_server/admin_schemas.py``); tests/cross compares
both with node.
"""
from __future__ import annotations

JS_WHITESPACE = ("\t\n\v\f\r \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007"
                 "\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000\ufeff")


def js_trim(s: str) -> str:
    return s.strip(JS_WHITESPACE)


def js_length(s: str) -> int:
    return len(s.encode("utf-16-le", "surrogatepass")) // 2
