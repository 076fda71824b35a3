"""Every negative control, by name: the table the CLI, the docs and the self-test read.

Rules: names are unique; every row passes :func:`negative_controls.control.problems`; there are
at least :data:`MINIMUM` controls and every family of :data:`negative_controls.control.FAMILIES`
has at least one. :func:`check` raises on any breach (a test calls it).
"""
from __future__ import annotations

from . import (
    controls_gateway,
    controls_ledger,
    controls_permission,
    controls_process,
    controls_reconnection,
    controls_teamtools,
    controls_wire,
)
from .control import FAMILIES, Control, problems

MINIMUM = 35

CONTROLS: tuple[Control, ...] = (
    *controls_wire.CONTROLS, *controls_reconnection.CONTROLS, *controls_permission.CONTROLS,
    *controls_ledger.CONTROLS, *controls_gateway.CONTROLS, *controls_process.CONTROLS,
    *controls_teamtools.CONTROLS,
)
BY_NAME: dict[str, Control] = {c.name: c for c in CONTROLS}

#: Controls whose bug is a broken state-machine rule (ledger, epochs, dedupe), for the property
#: machines of the next step: a stateful machine must find each one.
PROPERTY_CONTROLS: tuple[str, ...] = (
    "ledger-in-memory", "rerun-started-rows", "retire-deletes-rows", "claim-upserts",
    "ignore-fingerprint", "rerun-inflight-redelivery", "write-behind-receipts",
    "result-lost-on-5xx", "keep-channels-on-new-epoch", "keep-leases-on-new-epoch",
    "stale-epoch-header", "no-tombstone", "no-lease-tombstone",
    "skip-admit", "ignore-admit-false", "http-no-profile-check", "refusals-not-stored",
)

#: Controls whose bug bites only in a few percent of the machines' examples, for the soak
#: (``certify --soak``, docs/certification.md): a plain run of the families rarely meets it, a
#: soak finds and saves it, and a certify reading the same example database replays it first.
#: ``receipt-cap``: only an example that replays a command after ``RECEIPT_CAP`` later rows.
SOAK_CONTROLS: tuple[str, ...] = ("receipt-cap",)


class RegistryError(ValueError):
    """The table breaks one of its rules."""


def check(rows: tuple[Control, ...] = CONTROLS) -> None:
    names = [r.name for r in rows]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise RegistryError(f"duplicate control names: {', '.join(dupes)}")
    for row in rows:
        bad = problems(row)
        if bad:
            raise RegistryError(f"{row.name}: {'; '.join(bad)}")
    if len(rows) < MINIMUM:
        raise RegistryError(f"{len(rows)} controls, at least {MINIMUM} needed")
    missing = [f for f in FAMILIES if not any(r.family == f for r in rows)]
    if missing:
        raise RegistryError(f"families without a control: {', '.join(missing)}")
    for table, listed in (("PROPERTY_CONTROLS", PROPERTY_CONTROLS),
                          ("SOAK_CONTROLS", SOAK_CONTROLS)):
        unknown = [n for n in listed if n not in names]
        if rows is CONTROLS and unknown:
            raise RegistryError(f"{table} names no control: {', '.join(unknown)}")


def get(name: str) -> Control:
    try:
        return BY_NAME[name]
    except KeyError:
        raise KeyError(f"no negative control named {name!r}") from None
