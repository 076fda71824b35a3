"""Catalogue rows of the cases that cover sentences of docs/protocol.md no family case tests
(tests: conformance/cases/test_spec_extra.py). IDs 900–999 of each family prefix."""

from __future__ import annotations

from ..case_row import Case

_CFG = "config and process"
_LIM = "limits and bad input"
_PERM = "permission intersection"

ROWS: tuple[Case, ...] = (
    Case("CFG-902", "MUST", "Without --config the runner MUST exit with code 1.", "1.5", _CFG),
    Case("LIM-901", "MUST", "A core runner MUST refuse memory-extract with 409 "
         "memory_extraction_unavailable, without a Hermes effect.", "3.1 http", _LIM),
    Case("PERM-901", "MUST", "A core runner (no computers) MUST refuse every http request that "
         "carries a computer target (a download, session messages, /api/status), without a Hermes "
         "effect.",
         "3.1 http", _PERM),
    Case("LIM-902", "MUST", "gateway.open MUST accept any lower-case UUID as connectionId, and "
         "MUST refuse one that is already open with a plain error (runner_error), opening no "
         "second Hermes socket.", "3.2 gateway.open", _LIM),
    Case("TT-901", "MUST", "lease.create MUST apply requireProfile to its profile: a profile "
         "outside allowedProfiles is refused, without a bind.", "3.5 lease.create",
         "team tools", feature="team-tools"),
    Case("TT-902", "MUST", "gateway.close MUST dispose the leases of the channel (the plugin's "
         "unbind of a bound lease).", "3.4 gateway.close", "team tools", feature="team-tools"),
)
