"""Spec coverage: every MUST / SHOULD sentence of a markdown spec names the cases that test it.

Rules of this module:
- A normative sentence is one that contains an upper-case RFC 2119 keyword: MUST, MUST NOT,
  SHOULD, SHOULD NOT, REQUIRED, SHALL. (MAY is optional behaviour and needs no case.)
- It is covered when it carries a tag ``[cases: GEN-003, DED-001]``, inside the sentence or
  right after its full stop. Every ID in a tag must be in the catalogue.
- Fenced code blocks, HTML comments and headings are not prose and are skipped; table rows and
  list items are prose (each is its own sentence group). An inline code span (`` `MUST` ``,
  `` `[cases: …]` ``) quotes text, it does not use it: its keywords and tags do not count.
- Findings are data: line, sentence, problem. ``python -m conformance spec-coverage FILE`` prints
  them and exits 1 when there are any.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from .catalogue import CATALOGUE, Catalogue

NORMATIVE = re.compile(r"\b(MUST|SHOULD|REQUIRED|SHALL)\b")
TAG = re.compile(r"\[cases:\s*([^\]]*)\]")
SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z`*\[(])")
CODE_SPAN = re.compile(r"`[^`]*`")


@dataclass(frozen=True)
class Finding:
    line: int
    sentence: str
    problem: str

    def __str__(self) -> str:
        short = self.sentence if len(self.sentence) <= 120 else self.sentence[:117] + "..."
        return f"line {self.line}: {self.problem}: {short}"


Line = tuple[int, str]


def _blocks(text: str) -> Iterator[list[Line]]:
    """The (line number, text) lines of each prose block: paragraph, list item or table row."""
    fenced = False
    comment = False
    block: list[Line] = []

    def flush() -> Iterator[list[Line]]:
        if block:
            yield list(block)
        block.clear()

    for no, line in enumerate(text.splitlines(), 1):
        s = line.strip()
        if s.startswith(("```", "~~~")):
            yield from flush()
            fenced = not fenced
            continue
        if fenced:
            continue
        if comment or s.startswith("<!--"):
            comment = "-->" not in s
            continue
        if not s or s.startswith("#"):
            yield from flush()
            continue
        if s.startswith("|") or re.match(r"^([-*+]|\d+[.)])\s", s):
            yield from flush()
            block.append((no, s))
            if s.startswith("|"):
                yield from flush()
            continue
        block.append((no, s))
    yield from flush()


def sentences(lines: list[Line]) -> list[Line]:
    """Split a block into (line number, sentence); a tag opening a segment joins the one before."""
    text = ""
    starts: list[tuple[int, int]] = []  # (offset in text, line number)
    for no, s in lines:
        starts.append((len(text), no))
        text += s + " "
    text = text.rstrip()

    def line_at(offset: int) -> int:
        return max(no for off, no in starts if off <= offset)

    cuts = [0, *(m.end() for m in SENTENCE_END.finditer(text)), len(text)]
    out: list[Line] = []
    for a, b in zip(cuts, cuts[1:], strict=False):
        part = text[a:b].strip()
        if not part:
            continue
        tag = TAG.match(part) if out and part.startswith("[cases:") else None
        if tag:
            out[-1] = (out[-1][0], f"{out[-1][1]} {tag.group(0)}")
            part = part[tag.end():].strip()
            if not part:
                continue
            a += tag.end()
        out.append((line_at(a), part))
    return out


def check(text: str, catalogue: Catalogue = CATALOGUE) -> list[Finding]:
    findings: list[Finding] = []
    for block in _blocks(text):
        for line, sentence in sentences(block):
            prose = CODE_SPAN.sub("", sentence)
            tags = TAG.findall(prose)
            ids = [i.strip() for t in tags for i in t.split(",") if i.strip()]
            for case_id in ids:
                if case_id not in catalogue:
                    findings.append(Finding(line, sentence, f"unknown case {case_id}"))
            if NORMATIVE.search(TAG.sub("", prose)) and not ids:
                findings.append(Finding(line, sentence, "normative sentence without case IDs"))
    return findings


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1 or args[0].startswith("-"):
        print("usage: python -m conformance spec-coverage FILE.md", file=sys.stderr)
        return 2
    try:
        text = Path(args[0]).read_text(encoding="utf-8")
    except OSError as exc:
        print(f"spec-coverage: error: cannot read {args[0]}: {exc.strerror}", file=sys.stderr)
        return 2
    findings = check(text)
    for f in findings:
        print(f)
    print(f"{len(findings)} finding(s)", file=sys.stderr)
    return 1 if findings else 0
