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
)
