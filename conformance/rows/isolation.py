"""Catalogue rows of the isolation cases (tests: conformance/cases/test_isolation.py)."""

from __future__ import annotations

from ..case_row import Case

F = "session isolation"

ROWS: tuple[Case, ...] = (
    Case("ISO-001", "MUST", "The runner MUST forward only frames whose session_id is a session "
         "owned by this channel: events of a session reach only its own channel.", "3.2", F),
    Case("ISO-002", "MUST", "An rpc naming a session owned by another channel MUST be refused "
         "with runner_session_forbidden, without reaching Hermes.", "3.3", F),
    Case("ISO-003", "MUST", "An rpc naming a session not created through the runner MUST be "
         "refused with runner_session_forbidden, without reaching Hermes.", "3.3", F),
    Case("ISO-004", "MUST", "Revoking one channel MUST close only that channel: the runner stays "
         "connected and sends no interrupt to other channels' sessions.", "2.6.4", F,
         upstream="runner.test.ts#18"),
    Case("ISO-005", "MUST", "The runner MUST treat a session as owned from the moment the "
         "session.create reply is read, so an event right behind the reply is forwarded.",
         "3.2", F),
    Case("ISO-006", "MUST", "The runner MUST post the frames of one channel in the order Hermes "
         "sent them.", "2.6.4", F),
    Case("ISO-007", "MUST", "When Hermes closes the WebSocket of a channel, the runner MUST post "
         "{connectionId, closed:true}.", "2.6.4", F),
    Case("ISO-008", "MUST", "The runner MUST NOT forward frames without a session_id (such as "
         "gateway.ready).", "3.2", F),
    Case("ISO-009", "MUST", "A session resumed through a channel MUST become owned by it: its "
         "events are forwarded and rpc on it is allowed.", "3.2", F),
    Case("ISO-010", "MUST", "On a 410 from event the runner MUST close that channel, and MUST NOT "
         "close any other channel or disconnect.", "2.6.4", F),
    Case("ISO-011", "MUST", "lease.create for a session no open channel of the runner owns MUST "
         "be refused with runner_session_forbidden.", "3.5", F),
    # 9NN: sentences of docs/protocol.md that no case tested until the spec-coverage sweep
    # (each tagged with its case there; docs/spec-coverage-gaps.txt lists those still open).
    Case("ISO-901", "MUST", "The runner MUST consider a session no longer running once it "
         "forwarded its message.complete: a later gateway.close sends it no session.interrupt.",
         "3.2", F),
    Case("ISO-902", "SHOULD", "The runner SHOULD also consider a session running on "
         "message.start: a queued turn Hermes starts by itself (announced by a message.start "
         "after the previous turn's message.complete) is interrupted at gateway.close.", "3.2",
         F),
)
