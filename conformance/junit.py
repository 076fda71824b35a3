"""``junit.xml`` speaks the conformance statuses: fail → ``<failure>``, error/timeout →
``<error>``, not-run / not-applicable / expected-fail → ``<skipped>`` (results.STATUS_TABLE's
``junit`` column), whatever pytest's writer chose (it writes ``<error>`` for any failure outside
the call phase, a runner that died at start-up included).

Rules of this module:
- A case's testcase carries its status as the ``status`` property (the plugin adds it); a
  testcase without one (an ordinary test) is left as pytest wrote it.
- The element's message is the case's first line of text (pytest's own message when there is
  one) prefixed with the status; its text is kept. The suite counts are recomputed.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from .results import BY_STATUS

OUTCOME_TAGS = ("failure", "error", "skipped")


def _prop(case: ET.Element, name: str) -> str | None:
    """The value of the testcase's property ``name`` (None without one)."""
    for prop in case.iterfind("properties/property"):
        if prop.get("name") == name:
            return prop.get("value")
    return None


def rewrite_case(case: ET.Element) -> None:
    status = _prop(case, "status")
    if status not in BY_STATUS:
        return
    found = [el for el in case if el.tag in OUTCOME_TAGS]
    message = next((el.get("message", "") for el in found if el.get("message")), "")
    text = "\n".join(el.text or "" for el in found).strip()
    for el in found:
        case.remove(el)
    tag = BY_STATUS[status].junit
    if tag is None:
        return
    el = ET.Element(tag, {"type": status, "message": f"{status}: {message}".strip()[:500]})
    el.text = text or None
    props = case.find("properties")
    case.insert(0 if props is None else list(case).index(props) + 1, el)


def rewrite(path: Path) -> None:
    """Rewrite the JUnit file at ``path`` in place (a missing or unreadable file is left)."""
    try:
        tree = ET.parse(path)
    except (OSError, ET.ParseError):
        return
    root = tree.getroot()
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    for suite in suites:
        cases = list(suite.iter("testcase"))
        for case in cases:
            rewrite_case(case)
        recount(suite)
    tree.write(path, encoding="utf-8", xml_declaration=True)


def recount(suite: ET.Element) -> None:
    """Set the suite's counts (tests, failures, errors, skipped) from its testcases."""
    cases = list(suite.iter("testcase"))
    suite.set("tests", str(len(cases)))
    for tag, attr in (("failure", "failures"), ("error", "errors"), ("skipped", "skipped")):
        suite.set(attr, str(sum(1 for c in cases if c.find(tag) is not None)))


def replace_cases(path: Path, later: Path) -> None:
    """Put each case's ``testcase`` of the JUnit file ``later`` (a retry's) in place of the same
    case's in ``path`` (by the ``case_id`` property); the counts are recomputed. An unreadable
    file leaves ``path`` as it is."""
    try:
        tree, again = ET.parse(path), ET.parse(later)
    except (OSError, ET.ParseError):
        return
    newer = {cid: case for case in again.getroot().iter("testcase")
             if (cid := _prop(case, "case_id")) is not None}
    root = tree.getroot()
    for suite in [root] if root.tag == "testsuite" else list(root.iter("testsuite")):
        for i, case in enumerate(list(suite)):
            if case.tag == "testcase" and (cid := _prop(case, "case_id")) in newer:
                suite.remove(case)
                suite.insert(i, newer[cid])
        recount(suite)
    tree.write(path, encoding="utf-8", xml_declaration=True)
