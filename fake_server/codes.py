"""Every error code the simulated control plane answers, with its HTTP status and fixed message.

Rules:
- One table per package: a refusal anywhere in ``fake_server`` names a row of ``CODES`` and is
  built by ``error_body``; no module writes ``{"error", "code"}`` by hand.
- ``docs/protocol.md``'s code table is checked against this table by a test.
- Messages never echo request values (no token, no path, no body).
"""

from __future__ import annotations

from dataclasses import dataclass

NO_STORE: dict[str, str] = {"Cache-Control": "no-store"}


@dataclass(frozen=True)
class Code:
    code: str
    status: int
    message: str


def _table(*rows: Code) -> dict[str, Code]:
    table: dict[str, Code] = {}
    for row in rows:
        if row.code in table:
            raise ValueError(f"duplicate code {row.code}")
        table[row.code] = row
    return table


# Rows are added per area; keep each area's rows together.
CODES: dict[str, Code] = _table(
    # --- machine API, hub, relay (lifecycle) ---
    # --- gates, admin, artifacts ---
)


def error_body(code: str, message: str | None = None) -> dict[str, str]:
    """``{"error": message, "code": code}`` for a row of ``CODES`` (message defaults to the row's)."""
    row = CODES.get(code)
    return {"error": message if message is not None else (row.message if row else code), "code": code}


def status_of(code: str) -> int:
    return CODES[code].status
