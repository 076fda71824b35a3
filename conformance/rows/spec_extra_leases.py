"""Catalogue rows of spec-coverage cases for the lease re-check of protocol 1 §6.5 (tests:
conformance/cases/test_spec_extra_leases.py). They move the runner's clock mid-run (the
adapter's live clock). IDs 905–999 of the team-tools family."""

from __future__ import annotations

from ..case_row import Case

_TT = "team tools"

ROWS: tuple[Case, ...] = (
    Case("TT-905", "MUST", "Every 5 min after a lease was created the runner MUST re-check it, and "
         "a passing re-check of a bound lease MUST bind it again with the new expires_at: 5 min "
         "on the runner's clock bring a second bind whose expires_at is 30 min from then.",
         "6.5", _TT, feature="team-tools", needs=("faketime",)),
    Case("TT-906", "MUST", "A passing re-check MUST move the lease's expiry to 30 min from now: a "
         "lease re-checked every 5 min still serves tools/list 30 min 10 s after its creation.", "6.5", _TT,
         feature="team-tools", needs=("faketime",)),
    Case("TT-907", "MUST", "A failing re-bind MUST dispose the lease: when the plugin refuses the "
         "re-check's bind, the lease's listener stops serving (410 team_tools_expired or "
         "closed).", "6.5", _TT, feature="team-tools", needs=("faketime",)),
    Case("TT-908", "MUST", "The runner MUST update the stored session id of the leases bound to "
         "a session from each session.info of that session: after Hermes announces a new stored "
         "id, the re-check's bind carries it.", "3.2", _TT, feature="team-tools", needs=("faketime",)),
)
