"""Units of the engine: verdicts, baselines, results, spec coverage, badge (compare:
``test_compare.py``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conformance import baseline, spec_coverage
from conformance.catalogue import Case, Catalogue
from conformance.report import render_html
from conformance.report.badge import certification_badge
from conformance.results import CaseResult, RunResults, combine, redact, validate
from conformance.verdict import CaseFailed, expect


def test_case_failed_carries_expected_actual_witness() -> None:
    with pytest.raises(CaseFailed) as ei:
        expect(1 == 2, expected="one effect", actual="2 effects", witness=["a", "b"])
    e = ei.value
    assert isinstance(e, AssertionError)
    assert (e.expected, e.actual, e.witness) == ("one effect", "2 effects", ("a", "b"))
    assert str(e) == "expected: one effect\nactual:   2 effects\nwitness:\n  a\n  b"
    expect(True, expected="x", actual="y")  # a kept promise raises nothing


def test_baseline_formats() -> None:
    assert baseline.parse("GEN-001\n# comment\nDED-002  # why\n\n") == {"GEN-001", "DED-002"}
    assert baseline.parse('["GEN-001"]') == {"GEN-001"}
    assert baseline.parse('{"cases": ["TT-010"]}') == {"TT-010"}
    results = {"cases": [{"id": "GEN-001", "status": "fail"}, {"id": "GEN-002", "status": "pass"},
                         {"id": "GEN-003", "status": "expected-fail"}]}
    assert baseline.parse(json.dumps(results)) == {"GEN-001", "GEN-003"}
    with pytest.raises(baseline.BaselineError, match="not a case ID"):
        baseline.parse("GEN-001 DED-002\n")
    with pytest.raises(baseline.BaselineError, match="not valid JSON"):
        baseline.parse("[GEN-001")
    assert baseline.render(["B-001", "A-001"], header="x") == "# x\nA-001\nB-001\n"


def test_unreadable_baseline_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(baseline.BaselineError) as ei:
        baseline.load(tmp_path / "nope")
    assert "\n" not in str(ei.value) and "cannot read baseline" in str(ei.value)


def test_redact_and_combine() -> None:
    assert redact("token=abcd1234 and abcd1234", {"abcd1234", ""}) == "token=«redacted» and «redacted»"
    assert combine(["pass", "not-applicable"]) == "not-applicable"
    assert combine(["pass", "stale"]) == "stale"
    assert combine(["expected-fail", "fail"]) == "fail"
    assert combine([]) == "pass"


def rec(cid: str, status: str, level: str = "MUST") -> CaseResult:
    return CaseResult(id=cid, level=level, family="generations", feature="core", section="2.4",
                      requirement=f"x {level} y", status=status)


def run(*cases: CaseResult) -> RunResults:
    return RunResults(runner_cmd="r --config {config}", profile="core", harness_version="0",
                      started="2026-12-01T00:00:00+00:00", seed=1, cases=list(cases))


def test_ok_only_when_no_applicable_must_fails_and_nothing_is_stale() -> None:
    assert run(rec("GEN-001", "pass"), rec("GEN-002", "expected-fail")).ok()
    assert run(rec("GEN-001", "pass"), rec("DED-001", "fail", "SHOULD")).ok()
    assert run(rec("GEN-001", "not-applicable")).ok()
    assert not run(rec("GEN-001", "fail")).ok()
    assert not run(rec("GEN-001", "stale")).ok()
    r = run(rec("GEN-001", "pass"), rec("GEN-002", "expected-fail"), rec("GEN-003", "not-applicable"))
    assert r.level_figures("MUST") == (1, 2)
    validate(r.to_dict())


def test_report_escapes_markup_and_redacts() -> None:
    bad = rec("GEN-001", "fail")
    bad.actual = "<script>alert(1)</script> sekrit-123456"
    bad.transcript = ["<- 200 <b>bold</b>"]
    html = render_html(run(bad), secrets={"sekrit-123456"})
    assert "<script>alert" not in html and "&lt;script&gt;" in html
    assert "&lt;b&gt;bold&lt;/b&gt;" in html and "sekrit-123456" not in html


def test_badge_colour_follows_the_verdict() -> None:
    assert "#2ea043" in certification_badge("core", 3, 3, True)
    assert "#cf222e" in certification_badge("core", 2, 3, False)
    assert "&lt;" in certification_badge("<core>", 0, 0, True)


SAMPLE_SPEC = """\
# Sample

## 2.4 Epochs

A runner MUST drop its channels on a new epoch. [cases: GEN-001, GEN-002] It MAY log it.
A stale result SHOULD be refused [cases: GEN-002] and the runner keeps going.
The runner MUST NOT retry after runner_unauthorized.

- The token MUST never be printed. [cases: CFG-404]
- Plain list item.

| rule | cases |
|---|---|
| Lease ids MUST be opaque. [cases: GEN-001] | |
| Tool ids SHOULD be stable. | |

```
The runner MUST ignore this code block.
```
<!-- A comment MUST be ignored. -->
"""


def test_spec_coverage_on_a_sample_document() -> None:
    cat = Catalogue([
        Case("GEN-001", "MUST", "x MUST y", "2.4", "generations"),
        Case("GEN-002", "MUST", "x MUST y", "2.4", "generations"),
    ])
    findings = spec_coverage.check(SAMPLE_SPEC, cat)
    got = [(f.line, f.problem, f.sentence[:30]) for f in findings]
    assert got == [
        (7, "normative sentence without case IDs", "The runner MUST NOT retry afte"),
        (9, "unknown case CFG-404", "- The token MUST never be prin"),
        (15, "normative sentence without case IDs", "| Tool ids SHOULD be stable. |"),
    ]


def test_spec_coverage_code_spans_quote_keywords_and_tags() -> None:
    cat = Catalogue([Case("GEN-001", "MUST", "x MUST y", "2.4", "generations")])
    doc = ("- The words `MUST` and `SHOULD` are used as in RFC 2119.\n"
           "- Each ends with a tag `[cases: …]` naming its cases.\n"
           "- The runner MUST send `x-runner-reset` [cases: GEN-001].\n"
           "- The runner SHOULD send `x-runner-features` [cases: ].\n")
    got = [(f.line, f.problem) for f in spec_coverage.check(doc, cat)]
    assert got == [(4, "normative sentence without case IDs")]


def test_spec_coverage_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = tmp_path / "p.md"
    doc.write_text("The runner MUST exit 0.\n")
    assert spec_coverage.main([str(doc)]) == 1
    assert "line 1: normative sentence without case IDs" in capsys.readouterr().out
    doc.write_text("The runner may exit.\n")
    assert spec_coverage.main([str(doc)]) == 0
    assert spec_coverage.main([str(tmp_path / "missing.md")]) == 2


def test_protocol_md_normative_sentences_carry_case_ids() -> None:
    text = (Path(__file__).resolve().parents[2] / "docs" / "protocol.md").read_text()
    if "[cases:" not in text:
        pytest.skip("docs/protocol.md carries no [cases: …] tags yet (they land with the cases)")
    findings = spec_coverage.check(text)
    ledger = Path(__file__).resolve().parents[2] / "docs" / "spec-coverage-gaps.txt"
    known = {ln for ln in ledger.read_text().splitlines() if ln and not ln.startswith("#")}
    found = {f"{f.problem}: {f.sentence[:80]}" for f in findings}
    new, stale = sorted(found - known), sorted(known - found)
    assert not new, "normative sentences without a case (tag them or write the case):\n" + "\n".join(new)
    assert not stale, "covered now, delete from docs/spec-coverage-gaps.txt:\n" + "\n".join(stale)


def test_timeline_lanes_and_witness_rows() -> None:
    from conformance.report.sections import columns, sections
    from conformance.report.timeline import cells, rows, witness_seqs

    assert witness_seqs(['{"seq":43,"route":"event"}', "#8 control-plane (history#9[0])",
                         '"seq": 41']) == {8, 9, 41, 43}
    assert [c["span"] for c in cells("runner", ("cp", "runner"), "x")] == [2, 1]
    assert [c["span"] for c in cells("hermes", ("runner", "hermes"), "x")] == [1, 2]
    assert [c["text"] for c in cells("cp", None, "fact")] == ["fact", "", ""]
    out = rows([{"type": "lifecycle", "seq": 8, "kind": "queued"}, "foreign text",
                {"type": "telepathy", "seq": 9}], ["#8 …"])
    assert [(r["type"], r["witness"]) for r in out] == [("lifecycle", True), ("text", False),
                                                        ("text", False)]
    mixed = [rec("GEN-001", "pass"), rec("GEN-002", "novel"), rec("GEN-003", "fail"),
             rec("GEN-004", "expected-fail")]
    assert [s.status for s in sections(mixed)] == ["fail", "expected-fail", "novel", "pass"]
    assert columns(mixed)[0] == "fail" and "novel" in columns(mixed)
