"""The catalogue's rows, one module per family; ``ALL_ROWS`` is their concatenation in this order."""

from __future__ import annotations

from ..case_row import Case
from . import (
    cancel,
    config_process,
    dedupe,
    faults,
    generations,
    hermes_interop,
    isolation,
    limits,
    permission,
    properties,
    receipts,
    reconnection,
    secrets,
    spec_extra,
    spec_extra_gateway,
    spec_extra_hermes,
    spec_extra_leases,
    spec_extra_process,
    spec_extra_state,
    spec_extra_wire,
    team_tools,
    wire,
)

ALL_ROWS: tuple[Case, ...] = (
    *wire.ROWS,
    *permission.ROWS,
    *secrets.ROWS,
    *dedupe.ROWS,
    *receipts.ROWS,
    *generations.ROWS,
    *reconnection.ROWS,
    *cancel.ROWS,
    *isolation.ROWS,
    *config_process.ROWS,
    *limits.ROWS,
    *team_tools.ROWS,
    *properties.ROWS,
    *faults.ROWS,
    *hermes_interop.ROWS,
    *spec_extra.ROWS,
    *spec_extra_process.ROWS,
    *spec_extra_gateway.ROWS,
    *spec_extra_hermes.ROWS,
    *spec_extra_leases.ROWS,
    *spec_extra_state.ROWS,
    *spec_extra_wire.ROWS,
)
