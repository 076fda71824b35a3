"""One long-lived ``node`` process answering JavaScript questions: a JSON line in, a line out.

Requests: ``{"op": "stringify", "text": <JSON text>}`` → ``JSON.stringify(JSON.parse(text))``;
``{"op": "trim", "s": <string>}`` → ``s.trim()``; ``{"op": "length", "s": <string>}`` →
``s.length``. Answers are base64 of the UTF-8 bytes (lone surrogates are escaped by
``JSON.stringify`` itself, so the bytes are always valid UTF-8).
"""

from __future__ import annotations

import base64
import json
import shutil
import subprocess

NODE = shutil.which("node")

_SCRIPT = r"""
const rl = require('readline').createInterface({input: process.stdin});
rl.on('line', (line) => {
  const q = JSON.parse(line);
  let out;
  if (q.op === 'stringify') out = JSON.stringify(JSON.parse(q.text));
  else if (q.op === 'trim') out = JSON.stringify(q.s.trim());
  else if (q.op === 'length') out = String(q.s.length);
  else out = 'unknown op';
  process.stdout.write(Buffer.from(out, 'utf8').toString('base64') + '\n');
});
"""


class Node:
    def __init__(self) -> None:
        assert NODE is not None
        self.proc = subprocess.Popen([NODE, "-e", _SCRIPT], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE)

    def _ask(self, **query: object) -> bytes:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(query).encode("ascii") + b"\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        assert line, "node exited"
        return base64.b64decode(line)

    def stringify(self, text: str) -> bytes:
        return self._ask(op="stringify", text=text)

    def trim(self, s: str) -> str:
        result: str = json.loads(self._ask(op="trim", s=s))
        return result

    def length(self, s: str) -> int:
        return int(self._ask(op="length", s=s))

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait(timeout=10)
