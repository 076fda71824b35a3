"""docs/protocol.md stays the self-contained vendor text it claims to be.

Rules checked here:
- No document under docs/ names a path of this machine (``/work/``, ``/root/``, ``/home/``).
- Every sentence of protocol.md that carries MUST, MUST NOT, SHOULD or SHOULD NOT carries exactly
  one requirement tag ``[cases: …]``, and no tag stands in a sentence without such a keyword.
  Key words inside code spans are quotations, not requirements.
- protocol.md has one section "Error codes" with the table ``| code | status | sent by | meaning |``;
  every row names a code in backticks, HTTP statuses (``404`` or ``400 / 409``) and a known sender,
  and no (code, sender) pair appears twice.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parent.parent / "docs"
PROTOCOL = DOCS / "protocol.md"
KEYWORD = re.compile(r"\b(MUST|SHOULD)\b")
TAG = re.compile(r"\[cases: [^\]]*\]")
SENDERS = {"control plane", "runner", "runner listener", "scripted Hermes"}
HEADER = "| code | status | sent by | meaning |"


def _blocks(text: str) -> list[str]:
    """Paragraphs and list items joined into one line each; table rows and headings alone."""
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    blocks: list[str] = []
    cur: list[str] = []
    for line in text.split("\n"):
        item = re.match(r"\s*([-*]|\d+\.)\s", line)
        if not line.strip() or item or line.startswith(("#", "|")):
            if cur:
                blocks.append(" ".join(cur))
                cur = []
            if line.startswith(("#", "|")):
                blocks.append(line)
                continue
            if not line.strip():
                continue
            line = line[item.end():] if item else line
        cur.append(line.strip())
    if cur:
        blocks.append(" ".join(cur))
    return blocks


def sentences(text: str) -> list[str]:
    out: list[str] = []
    for block in _blocks(text):
        plain = re.sub(r"`[^`]*`", "CODE", block)
        if block.startswith("|"):
            out.append(plain)
        else:
            # not inside a tag: "[cases: GEN-008]" is no sentence end
            out.extend(re.split(r"(?<=[.!?:])(?<!\[cases:)\s+(?=[A-Z(*⚑\[])", plain))
    return out


def tag_problems(text: str) -> list[str]:
    problems = []
    for s in sentences(text):
        tags = len(TAG.findall(s))
        if KEYWORD.search(s) and tags != 1:
            problems.append(f"{tags} tags: {s[:160]}")
        elif tags and not KEYWORD.search(s):
            problems.append(f"tag without a requirement: {s[:160]}")
    return problems


def code_rows(text: str) -> list[list[str]]:
    section = text.split("\n## 11. Error codes\n", 1)[1].split("\n## ", 1)[0]
    lines = section.splitlines()
    start = lines.index(HEADER)
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split("|")])
    return rows


@pytest.mark.parametrize("doc", sorted(DOCS.glob("*.md")), ids=lambda p: p.name)
def test_no_machine_paths(doc: Path) -> None:
    hits = re.findall(r"(?<![\w.])/(?:work|root|home)/\S*", doc.read_text())
    assert not hits, hits


def test_every_requirement_sentence_is_tagged() -> None:
    assert tag_problems(PROTOCOL.read_text()) == []


def test_the_tag_check_can_fail() -> None:
    bad = "- The runner MUST poll.\n- The runner polls [cases: ].\n- It MUST x [cases: ] and y [cases: ].\n"
    assert len(tag_problems(bad)) == 3


def test_error_code_table_is_well_formed() -> None:
    text = PROTOCOL.read_text()
    assert text.count("\n## 11. Error codes\n") == 1
    assert text.count(HEADER) == 1
    rows = code_rows(text)
    assert len(rows) > 50
    seen = set()
    for row in rows:
        assert len(row) == 4, row
        code, status, sender, meaning = row
        assert re.fullmatch(r"`[a-z][a-z0-9_]*`", code), row
        assert re.fullmatch(r"\d{3}( / \d{3})*", status), row
        assert sender in SENDERS, row
        assert meaning, row
        assert (code, sender) not in seen, row
        seen.add((code, sender))
