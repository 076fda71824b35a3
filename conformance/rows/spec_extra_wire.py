"""Catalogue rows of spec-coverage cases for the machine-API client (protocol 1 §2.1; tests:
conformance/cases/test_spec_extra_wire.py). IDs 900–999."""

from __future__ import annotations

from ..case_row import Case

_WIR = "wire basics"

ROWS: tuple[Case, ...] = (
    Case("WIR-903", "MUST", "The runner MUST NOT follow redirects: a poll answered 307 is a "
         "failed request (a reset poll follows) and the Location is never requested.",
         "2.1 Transport", _WIR),
    Case("WIR-904", "MUST", "The runner MUST act on the code of an error, not on its text or "
         "status: a 403 whose code is runner_instance_changed and whose text says "
         "runner_unauthorized leads to a reconnect, not an exit.", "2.1 Transport", _WIR),
    Case("WIR-905", "MUST", "A command whose expiresAt is missing or not a number MUST NOT be "
         "executed, even when its admit would be granted.", "4.3", _WIR),
    Case("WIR-907", "SHOULD", "The runner SHOULD open each gateway WebSocket on a connection "
         "of its own, never by upgrading a kept-alive connection that carried an HTTP request "
         "(Hermes 0.19.0's server may cut such a WebSocket 5 s after it opened).", "8.2", _WIR),
    Case("LIM-905", "SHOULD", "The runner SHOULD read at most 40 MiB of a response: a poll "
         "answer over 40 MiB is a failed poll, and the command in it is not acted on.",
         "2.1 Transport", "limits and bad input"),
)
