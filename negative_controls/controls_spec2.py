"""Negative controls for the lease re-check cases (``TT-905``..``TT-907`` of
``conformance/cases/test_spec_extra_leases.py``, protocol 1 §6.5) and the cases needing an
opt-in scripted-Hermes behaviour (``conformance/cases/test_spec_extra_scripted.py``): one
realistic bug each."""
from __future__ import annotations

import contextlib
from typing import Any

from .control import Control, const


def _renew_without_recheck(orig: Any) -> Any:
    async def _renew(self: Any, lease: Any, now: float) -> None:
        lease.next_renew = now + self.renew_every   # the timer ticks, nothing is checked or bound
    return _renew


def _renew_keeping_expiry(orig: Any) -> Any:
    async def _renew(self: Any, lease: Any, now: float) -> None:
        kept = lease.expires_at
        await orig(self, lease, now)
        lease.expires_at = kept   # re-bound (Hermes is told 30 min), the lease's own expiry stays
    return _renew


def _renew_ignoring_rebind(orig: Any) -> Any:
    async def _renew(self: Any, lease: Any, now: float) -> None:
        lease.next_renew = now + self.renew_every
        if not self._owned(lease):
            await self._dispose(lease)
            return
        lease.expires_at = now + self.ttl
        if lease.bound:
            with contextlib.suppress(Exception):   # "best effort": a failed re-bind is ignored
                await self._bind(lease)
    return _renew


def _missing_list_is_empty(orig: Any) -> Any:
    async def _active_list(self: Any, ch: Any, params: dict[str, Any]) -> Any:
        try:
            return await orig(self, ch, params)
        except Exception as exc:
            if getattr(exc, "code", None) == "session_stop_unconfirmed":
                return {"sessions": []}   # "no list, so nothing is running"
            raise
    return _active_list


_SEAM = "runner_ref.teamtools.leases:LeaseManager._renew"

CONTROLS: tuple[Control, ...] = (
    Control("no-lease-recheck", "team-tools",
            "Its 5-min lease timer neither re-checks nor re-binds the lease.",
            "a lease set up once and trusted until it expires (no periodic re-check)",
            _SEAM, ("TT-905",), _renew_without_recheck),
    Control("recheck-keeps-expiry", "team-tools",
            "A passing re-check re-binds but leaves the lease's own expiry where it was.",
            "two copies of one deadline (the one sent to Hermes, the one enforced) drifting apart",
            _SEAM, ("TT-906",), _renew_keeping_expiry),
    Control("failed-rebind-kept", "team-tools",
            "A re-check whose re-bind fails keeps the lease alive.",
            "best-effort renewal: tools keep being served to a Hermes that refused the binding",
            _SEAM, ("TT-907",), _renew_ignoring_rebind),
    Control("uncapped-error-text", "wire",
            "Puts an error's whole text into the error result (no 1000-char cap).",
            "an upstream's (Hermes') error text forwarded as it came: unbounded result bodies",
            "runner_ref.timings:ERROR_TEXT_CAP", ("WIR-906",), const(10 ** 9), rebind=True),
    Control("active-list-missing-is-empty", "permission",
            "Reads a session.active_list reply without a list as an empty list.",
            "a lenient parser defaulting a missing field: an unconfirmed stop reported as done",
            "runner_ref.gateway:Gateways._active_list", ("PERM-903",), _missing_list_is_empty),
    Control("lease-stored-id-stale", "team-tools",
            "Keeps a lease's stored session id from lease.create; later session.info frames "
            "do not update it.",
            "state copied at creation and never refreshed (Hermes rotated the session's storage)",
            "runner_ref.teamtools.leases:LeaseManager.on_session_info", ("TT-908",),
            const(lambda self, runtime_id, stored_id: None)),
)
