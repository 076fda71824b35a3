"""Catalogue rows of the Hermes interop cases (tests: conformance/cases/test_hermes_interop.py).

These cases need only Hermes' real behaviour (no pause point, no effect log), so they run
against the scripted Hermes by default and against a real Hermes Agent 0.19.0 with
``--hermes real[:PATH]`` (docs/certification.md, "Against a real Hermes").
"""

from __future__ import annotations

from ..case_row import Case

F = "Hermes interop"
TT = "team-tools"

ROWS: tuple[Case, ...] = (
    Case("HRM-001", "MUST", "An http GET of /api/status and of /api/profiles MUST be relayed from "
         "Hermes as {status: 200, headers, body: <base64 of Hermes' JSON>}.", "3.1", F),
    Case("HRM-002", "MUST", "A prompt.submit on a channel MUST stream the turn's events to that "
         "channel only, in Hermes' order: deltas that add up to the text of the "
         "message.complete that ends them.", "8.3", F),
    Case("HRM-003", "MUST", "A tool-calling turn MUST reach the channel as tool.start and "
         "tool.complete (with the tool's result) before the turn's message.complete.", "8.3", F),
    Case("HRM-004", "MUST", "An approval.request MUST reach the channel and approval.respond MUST "
         "resolve it, so the tool runs and the turn completes.", "3.3", F),
    Case("HRM-005", "MUST", "session.interrupt during a streamed turn MUST reach Hermes: the turn "
         "ends with message.complete status interrupted, before its full text.", "3.3", F),
    Case("HRM-006", "MUST", "gateway.close MUST interrupt the channel's running turn, close its "
         "Hermes socket and answer {ok:true}; no event of the channel is posted after it.",
         "3.4", F),
    Case("HRM-007", "MUST", "lease.create and lease.bind MUST bind the Hermes plugin so that the "
         "model's tool call reaches the control plane's tool route and its result comes back; "
         "lease.close MUST remove the tools.", "6.1", F, TT),
    Case("HRM-008", "MUST", "The team-tools acceptance scenario (two administrators, lifecycle, "
         "report back, a repeated request id, revocation mid-flight) MUST pass through the "
         "runner.", "6.1", F, TT),
)
