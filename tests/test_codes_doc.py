"""docs/protocol.md's error-code table agrees with the packages' code tables.

Rules:
- The table ``| code | status | sent by | meaning |`` in "Error codes" is the vendor's view; the
  tables that run are ``fake_server/codes.py`` ``CODES`` (sender "control plane") and
  ``runner_ref/codes.py`` ``CODES`` (sender "runner" for results and the machine-API client,
  "runner listener" for the loopback listener's answers and its failed-call envelopes).
- Every code a package sends is in the doc with that sender, and its status is among the row's.
- Every doc row of a sender names a code of that sender's table; for the runner, whose table
  has a row per status, the doc's statuses are exactly the table's.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from fake_server import codes as server_codes
from runner_ref import codes as runner_codes

from .test_protocol_doc import PROTOCOL, code_rows

SENDER_OF_SURFACE = {"result": "runner", "client": "runner", "listener": "runner listener",
                     "envelope": "runner listener"}

Table = dict[tuple[str, str], set[int]]   # (code, sender) → statuses


def doc_table(rows: Iterable[list[str]]) -> Table:
    out: Table = {}
    for code, status, sender, _meaning in rows:
        out[(code.strip("`"), sender)] = {int(s) for s in status.split(" / ")}
    return out


def server_table() -> Table:
    return {(c.code, "control plane"): {c.status} for c in server_codes.CODES.values()}


def runner_table() -> Table:
    out: Table = defaultdict(set)
    for c in runner_codes.CODES:
        out[(c.code, SENDER_OF_SURFACE[c.sent_as])].add(c.status)
    return dict(out)


def disagreements(doc: Table, package: Table, senders: set[str], *, exact: bool) -> list[str]:
    """What the doc and a package's table disagree on, for the package's senders."""
    bad = []
    for key, statuses in sorted(package.items()):
        if key not in doc:
            bad.append(f"{key[0]} ({key[1]}, {sorted(statuses)}) is missing from the doc")
        elif exact and statuses != doc[key] or not statuses <= doc[key]:
            bad.append(f"{key[0]} ({key[1]}): doc says {sorted(doc[key])}, "
                       f"the table {sorted(statuses)}")
    for key in sorted(doc):
        if key[1] in senders and key not in package:
            bad.append(f"{key[0]} ({key[1]}) is in the doc but not in the sender's table")
    return bad


def _doc() -> Table:
    return doc_table(code_rows(PROTOCOL.read_text(encoding="utf-8")))


def test_control_plane_codes_match_the_doc() -> None:
    assert disagreements(_doc(), server_table(), {"control plane"}, exact=False) == []


def test_runner_codes_match_the_doc() -> None:
    assert disagreements(_doc(), runner_table(), {"runner", "runner listener"}, exact=True) == []


def test_every_runner_surface_has_a_doc_sender() -> None:
    assert {c.sent_as for c in runner_codes.CODES} <= set(SENDER_OF_SURFACE)


def test_the_comparison_can_fail() -> None:
    doc = doc_table([["`a`", "400", "runner", "m"], ["`b`", "400 / 409", "runner", "m"],
                     ["`c`", "404", "runner", "m"], ["`z`", "500", "control plane", "m"]])
    package = {("a", "runner"): {401}, ("b", "runner"): {400}, ("d", "runner"): {400}}
    assert disagreements(doc, package, {"runner"}, exact=True) == [
        "a (runner): doc says [400], the table [401]",
        "b (runner): doc says [400, 409], the table [400]",
        "d (runner, [400]) is missing from the doc",
        "c (runner) is in the doc but not in the sender's table",
    ]
    assert disagreements(doc, {("b", "runner"): {409}}, {"control plane"}, exact=False) == [
        "z (control plane) is in the doc but not in the sender's table"]
