"""``report.html`` opened in real headless Chromium: failures first (the failing case is the first
case on the page), then expected failures, then passes folded per family; the failing case's
transcript is a timeline whose witness rows are highlighted and whose route filter hides the
other rows; the family table's numbers sit under their headers; no horizontal overflow at phone
width. Screenshots are kept under ``artifacts/conformance/``."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from conformance.report import render_html
from conformance.results import CaseResult, RunResults
from conformance.witness import item_line

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = os.environ.get("E2E_CHROMIUM", "/usr/bin/chromium")
ARTIFACTS = ROOT / "artifacts" / "conformance"


def exchange(seq: int, route: str, status: int, code: str | None = None) -> dict[str, Any]:
    return {"type": "exchange", "seq": seq, "time": 100.0 + seq, "route": route,
            "method": "GET" if route == "poll" else "POST", "runner_id": "r1", "instance": "i1",
            "request_epoch": None, "reset": False, "request_digest": None,
            "request_body": {"id": "cmd-1"} if route != "poll" else None, "epoch": "e1",
            "status": status, "code": code, "response_digest": None, "response_body": None,
            "end_time": 100.5 + seq, "fault": None, "seq_out": None,
            "command_id": "cmd-1" if route != "poll" else None, "connection_id": None,
            "lease_id": None, "call_id": None}


TRANSCRIPT: list[Any] = [
    exchange(40, "poll", 200),
    {"type": "lifecycle", "seq": 41, "time": 141.0, "kind": "delivered", "runner_id": "r1",
     "command_id": "cmd-1", "connection_id": None, "lease_id": None, "reason": None,
     "detail": {"exchange": 40}},
    exchange(42, "admit", 200),
    {"type": "effect", "seq": 43, "kind": "session.created", "session_id": "s1",
     "stored_session_id": None, "profile": "default", "socket_id": None, "time": 143.0,
     "detail": {}, "cause": {"transport": "http", "method": "POST", "path": "/api/sessions",
                             "query": {}, "request_id": None, "socket_id": None,
                             "connection": None}},
    exchange(44, "result", 200),
    {"type": "output", "run": 1, "stream": "stderr", "text": "2026-12-01T00:00:00Z connected"},
]


def sample() -> RunResults:
    fail = CaseResult(id="GEN-002", level="MUST", family="generations", feature="core",
                      section="2.4", requirement="A stale-epoch result MUST be refused.",
                      status="fail", expected="409 runner_epoch_stale",
                      actual='200 {"ok": true}',
                      witness=[item_line({**exchange(44, "result", 200),  # a long body
                                          "request_body": {"id": "cmd-1", "x": "x" * 300}})],
                      transcript=TRANSCRIPT,
                      replay="python -m conformance certify --runner-cmd 'node runner.mjs "
                             "--config {config}' --cases GEN-002 --seed 7")
    xfail = CaseResult(id="DED-002", level="MUST", family="dedupe", feature="core",
                       section="3.1", requirement="A replayed command MUST NOT run twice.",
                       status="expected-fail", detail="baseline: DED-002")
    passes = [CaseResult(id=f"{p}-00{n}", level="MUST", family=family, feature="core",
                         section="2.4", requirement=f"requirement {p}-00{n}", status="pass",
                         transcript_digest={"items": 3, "sha256": "ab" * 32})
              for p, family in (("AAA", "a-family"), ("GEN", "generations")) for n in (1, 3)]
    return RunResults(runner_cmd="node runner.mjs --config {config}", profile="core",
                      harness_version="0.1.0", started="2026-12-01T00:00:00+00:00", seed=7,
                      cases=[*passes, xfail, fail])


def test_report_reads_in_chromium(tmp_path: Path) -> None:
    from playwright.sync_api import sync_playwright

    page_file = tmp_path / "report.html"
    page_file.write_text(render_html(sample()))
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True,
                                     args=["--no-sandbox", "--disable-gpu"])
        try:
            for width, height in ((1100, 900), (375, 812)):
                page = browser.new_page(viewport={"width": width, "height": height})
                page.goto(page_file.as_uri())
                cases = page.locator("details.case")
                assert cases.first.get_attribute("id") == "GEN-002"  # failures first
                order = [cases.nth(i).get_attribute("id") for i in range(cases.count())]
                assert order == ["GEN-002", "DED-002", "AAA-001", "AAA-003", "GEN-001", "GEN-003"]
                headings = page.locator("h2.section").all_inner_texts()
                assert [h.rsplit(" (", 1)[0] for h in headings] == [
                    "Failures", "Expected failures (baselined)", "Passes"]
                assert page.locator("details#GEN-002").get_attribute("open") is not None
                families = page.locator("details.family")
                assert families.count() == 2 and not page.locator("details#GEN-001").is_visible()
                assert page.locator("details#GEN-002 dd pre").first.inner_text() == (
                    "409 runner_epoch_stale")
                _timeline(page)
                _family_table_aligned(page)
                overflow = page.evaluate(
                    "document.documentElement.scrollWidth - window.innerWidth")
                assert overflow <= 0, f"horizontal overflow of {overflow}px at {width}px"
                page.screenshot(path=str(ARTIFACTS / f"report-{width}.png"), full_page=True)
                page.close()
        finally:
            browser.close()


def _timeline(page: Any) -> None:
    rows = page.locator("table#tl-GEN-002 tbody > tr")
    assert rows.count() == len(TRANSCRIPT)
    assert rows.nth(0).is_visible()
    witness = page.locator("table#tl-GEN-002 tr.witness")
    assert witness.count() == 1 and "result" in witness.inner_text()
    lanes = [c.strip() for c in rows.nth(3).locator("td").all_inner_texts()]
    assert lanes[0] == "43" and lanes[1] == "" and "session.created" in lanes[2]  # runner ↔ Hermes
    page.locator("select.route-filter").select_option("admit")
    visible = [i for i in range(rows.count()) if rows.nth(i).is_visible()]
    assert visible == [2], visible  # only the admit exchange is left
    page.locator("select.route-filter").select_option("")
    assert all(rows.nth(i).is_visible() for i in range(rows.count()))


def _family_table_aligned(page: Any) -> None:
    table = page.locator("table.families")
    heads = table.locator("thead th")
    first = table.locator("tbody tr").first.locator("td")
    for i in range(1, heads.count()):
        head, cell = heads.nth(i).bounding_box(), first.nth(i).bounding_box()
        assert abs((head["x"] + head["width"]) - (cell["x"] + cell["width"])) < 1.5
        head_text = heads.nth(i).evaluate("e => getComputedStyle(e).textAlign")
        cell_text = first.nth(i).evaluate("e => getComputedStyle(e).textAlign")
        assert head_text == cell_text == "right"
