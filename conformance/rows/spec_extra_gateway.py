"""Catalogue rows of spec-coverage cases for channels, the ledger's rule order and team-tool
leases (protocol 1 §2.6.4, §3.1, §3.2–3.4, §4.3, §6.3, §6.4; tests:
conformance/cases/test_spec_extra_gateway.py and, for a channel's running sessions and
in-flight requests, conformance/cases/test_spec_extra_channels.py). IDs 900–999."""

from __future__ import annotations

from ..case_row import Case

_TT = "team tools"

ROWS: tuple[Case, ...] = (
    Case("CAN-901", "MUST", "gateway.close MUST finish within about 3 s however long the "
         "interrupts take: it is answered while Hermes still holds the session.interrupt.",
         "3.4", "cancel races"),
    Case("ISO-901", "MUST", "The runner MUST consider a session no longer running once it "
         "forwarded its message.complete: a later gateway.close sends it no session.interrupt.",
         "3.2", "session isolation"),
    Case("LIM-903", "SHOULD", "An RPC on a channel that is not open SHOULD be refused with "
         "runner_connection_closed.", "3.3", "limits and bad input"),
    Case("REC-902", "MUST", "A failed event post other than 410 MUST lead to a local "
         "disconnect: the channel's Hermes socket closes and the next poll carries "
         "x-runner-reset: 1.", "2.6.4", "reconnection"),
    Case("PERM-902", "SHOULD", "The runner SHOULD ask Hermes for the realpath it checked: a "
         "download through a symlink inside the roots reaches Hermes as the link's target.",
         "3.1 http", "permission intersection"),
    Case("DED-901", "MUST", "A delivery of an in-flight id with another payload MUST be answered "
         "idempotency_conflict at once, while the original is still running.", "4.3", "dedupe"),
    Case("TT-903", "MUST", "The lease token MUST hold at least 32 bytes of randomness: its text "
         "carries at least 256 bits for its alphabet, and two leases get different tokens.",
         "6.3", _TT, feature="team-tools"),
    Case("TT-904", "MUST", "A first bind whose answer lacks native_tools: true MUST be refused "
         "with team_tools_unavailable.", "6.4", _TT, feature="team-tools"),
    Case("CAN-902", "SHOULD", "If the channel closes while a session.create is in flight, the "
         "runner SHOULD answer it runner_command_uncertain.", "3.3", "cancel races"),
    Case("ISO-902", "SHOULD", "The runner SHOULD also consider a session running on "
         "message.start: a queued turn Hermes starts by itself (announced by a message.start "
         "after the previous turn's message.complete) is interrupted at gateway.close.", "3.2",
         "session isolation"),
    Case("CAN-903", "MUST", "If the channel closes after a request other than create/resume "
         "was sent and before its reply, the runner MUST NOT resend it: a prompt.submit held in "
         "Hermes at gateway.close reaches Hermes once.", "3.3", "cancel races"),
    Case("TT-909", "SHOULD", "If the stored session id changed while a bind was in flight, the "
         "runner SHOULD bind once more: a session.info with a new stored id read while the "
         "plugin holds the first bind is followed by a second bind carrying it.", "6.4", _TT,
         feature="team-tools"),
)
