"""fake_server's tables of codes (``fake_server/codes.py``, ``fake_server/team/codes.py``) are the
only places its codes and error bodies are spelled."""
from __future__ import annotations

from pathlib import Path

import pytest

from fake_server import codes
from fake_server.codes import Code
from fake_server.team import codes as team_codes

from ..code_literals import code_literals

PACKAGE = Path(codes.__file__).resolve().parent
TABLES = {PACKAGE / "codes.py", PACKAGE / "team" / "codes.py"}
ALL_CODES = set(codes.CODES) | set(team_codes.TEAM_CODES)
#: Rows no module sends by itself: a test arms them as injected faults.
FAULT_ONLY = {"SERVICE_UPDATING"}


def hand_written(source: str) -> list[tuple[int, str]]:
    """Code strings and ``{"error", "code"}`` dict literals in ``source`` (docstrings aside)."""
    return code_literals(source, ALL_CODES)


def test_no_module_but_the_tables_spells_a_code_or_a_body() -> None:
    found = {str(p.relative_to(PACKAGE)): hits for p in sorted(PACKAGE.rglob("*.py"))
             if p not in TABLES and (hits := hand_written(p.read_text()))}
    assert found == {}


def test_the_scan_can_fail() -> None:
    source = ('"""runner_offline in a docstring is prose."""\n'
              'x = error_body("runner_offline")\n'
              'y = {"error": "m", "code": z}\n')
    assert hand_written(source) == [(2, "runner_offline"), (3, "{error, code} body")]


def _constants(module: object) -> dict[str, Code]:
    return {name: v for name, v in vars(module).items() if isinstance(v, Code) and name.isupper()}


def test_every_row_is_a_constant_and_used() -> None:
    server, team = _constants(codes), _constants(team_codes)
    assert sorted(r.code for r in server.values()) == sorted(codes.CODES)
    assert sorted(r.code for r in team.values()) == sorted(team_codes.TEAM_CODES)
    text = "".join(p.read_text() for p in PACKAGE.rglob("*.py") if p not in TABLES)
    unused = [n for n in server if f"codes.{n}" not in text and n not in FAULT_ONLY]
    unused += [n for n in team if f"tc.{n}" not in text]
    assert unused == []


def test_builders() -> None:
    assert codes.error_body(codes.RUNNER_OFFLINE) == {"error": "runner offline", "code": "runner_offline"}
    assert codes.error_body(codes.RUNNER_BUSY, "too many") == {"error": "too many", "code": "runner_busy"}
    # an injected fault's code string: looked up, or its own message when outside the table
    assert codes.error_body("runner_busy") == codes.error_body(codes.RUNNER_BUSY)
    assert codes.error_body("bad_gateway") == {"error": "bad_gateway", "code": "bad_gateway"}
    assert codes.refusal(codes.RUNNER_LEASE_EXPIRED) == (
        410, {"error": "runner lease expired", "code": "runner_lease_expired"})
    err = team_codes.TeamError(team_codes.TEAM_TASK_STATE)
    assert (err.status, err.code) == (409, "team_task_state")
    with pytest.raises(ValueError, match="duplicate"):
        codes.code_table(codes.RUNNER_ERROR, Code("runner_error", 400, "other"))
