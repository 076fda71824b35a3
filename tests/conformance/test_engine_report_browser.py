"""``report.html`` opened in real headless Chromium: each case readable, failing ones open,
collapsible transcripts, no horizontal overflow at phone width. A screenshot is kept under
``artifacts/conformance/``."""

from __future__ import annotations

import os
from pathlib import Path

from conformance.report import render_html
from conformance.results import CaseResult, RunResults

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = os.environ.get("E2E_CHROMIUM", "/usr/bin/chromium")
ARTIFACTS = ROOT / "artifacts" / "conformance"


def sample() -> RunResults:
    fail = CaseResult(id="GEN-002", level="MUST", family="generations", feature="core",
                      section="2.4", requirement="A stale-epoch result MUST be refused.",
                      status="fail", expected="409 runner_epoch_stale",
                      actual='200 {"ok": true}',
                      witness=["#41 -> POST /api/runner/result epoch=1 " + "x" * 300],
                      transcript=["#40 <- 200 poll", "#41 -> POST /api/runner/result"],
                      replay="python -m conformance certify --runner-cmd 'node runner.mjs "
                             "--config {config}' --cases GEN-002 --seed 7")
    ok = CaseResult(id="GEN-001", level="MUST", family="generations", feature="core",
                    section="2.4", requirement="A new epoch MUST drop old channels.",
                    status="pass", transcript=["#1 -> GET /api/runner/poll"])
    return RunResults(runner_cmd="node runner.mjs --config {config}", profile="core",
                      harness_version="0.1.0", started="2026-12-01T00:00:00+00:00", seed=7,
                      cases=[fail, ok])


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
                assert page.locator("details#GEN-002").get_attribute("open") is not None
                assert page.locator("details#GEN-001").get_attribute("open") is None
                assert page.locator("details#GEN-002 dd pre").first.inner_text() == (
                    "409 runner_epoch_stale")
                transcript = page.locator("details#GEN-002 details.transcript pre")
                assert not transcript.is_visible()
                page.locator("details#GEN-002 details.transcript summary").click()
                assert transcript.is_visible()
                overflow = page.evaluate(
                    "document.documentElement.scrollWidth - window.innerWidth")
                assert overflow <= 0, f"horizontal overflow of {overflow}px at {width}px"
                page.screenshot(path=str(ARTIFACTS / f"report-{width}.png"), full_page=True)
                page.close()
        finally:
            browser.close()
