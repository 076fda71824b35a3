"""The runner's one table of codes (``runner_ref/codes.py``) is the only place codes live."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

from runner_ref import codes
from runner_ref.errors import CommandError
from runner_ref.timings import ERROR_TEXT_CAP

from ..code_literals import code_literals

PACKAGE = Path(codes.__file__).resolve().parent
ALL_CODES = {row.code for row in codes.CODES}


def _code_literals(path: Path) -> list[tuple[int, str]]:
    return code_literals(path.read_text(), ALL_CODES, bodies=False)


def test_no_module_but_codes_spells_a_code() -> None:
    found = {str(p.relative_to(PACKAGE)): hits for p in sorted(PACKAGE.rglob("*.py"))
             if p.name != "codes.py" and (hits := _code_literals(p))}
    assert found == {}


def _error_bodies(path: Path) -> list[int]:
    """Lines of dict literals with an ``"error"`` key (a body or a result built by hand)."""
    return [node.lineno for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.Dict)
            and "error" in {k.value for k in node.keys if isinstance(k, ast.Constant)}]


def test_no_module_but_codes_writes_an_error_body() -> None:
    found = {str(p.relative_to(PACKAGE)): hits for p in sorted(PACKAGE.rglob("*.py"))
             if p.name != "codes.py" and (hits := _error_bodies(p))}
    assert found == {}
    assert _error_bodies(PACKAGE / "codes.py")  # the scan finds the builders' own bodies


def test_every_row_is_used() -> None:
    names = {name for name, v in vars(codes).items() if isinstance(v, codes.Code)}
    text = "".join(p.read_text() for p in PACKAGE.rglob("*.py") if p.name != "codes.py")
    assert sorted(n for n in names if f"codes.{n}" not in text) == []
    assert len(names) == len(codes.CODES)


def test_rows_are_unique_and_well_formed() -> None:
    keys = [(r.code, r.status, r.sent_as) for r in codes.CODES]
    assert len(keys) == len(set(keys))
    for r in codes.CODES:
        assert r.code.isidentifier() and r.code.islower() and r.message
        assert r.status == 200 if r.sent_as == "envelope" else 400 <= r.status <= 599
    with pytest.raises(ValueError, match="duplicate"):
        codes._check((codes.RUNNER_ERROR, codes.Code("runner_error", 400, "other")))


def test_builders() -> None:
    assert codes.error_result(codes.COMMAND_NOT_ADMITTED) == {
        "error": {"message": "command not admitted", "code": "runner_command_not_admitted"}}
    assert codes.error_result(codes.RUNNER_ERROR, "x" * 5000)["error"]["message"] == \
        "x" * ERROR_TEXT_CAP
    assert codes.error_result("forwarded_code", "from the server") == {
        "error": {"message": "from the server", "code": "forwarded_code"}}
    assert codes.error_body(codes.INVALID_JSON) == {"error": "invalid JSON", "code": "invalid_json"}
    err = CommandError.of(codes.COMPUTER_MESSAGES_UNAVAILABLE)
    assert (err.code, err.status, err.message) == ("computer_unavailable", 403,
                                                   "this runner has no computers")
    assert err.to_result() == codes.error_result(codes.COMPUTER_MESSAGES_UNAVAILABLE)


def test_docs_table_is_current() -> None:
    doc = (PACKAGE.parent / "docs" / "runner-ref.md").read_text()
    table = doc.split("<!-- codes:begin -->\n", 1)[1].split("\n<!-- codes:end -->", 1)[0]
    expected = ["| code | status | sent as | default message |", "|---|---|---|---|"] + [
        f"| `{r.code}` | {r.status} | {r.sent_as} | {r.message} |" for r in codes.CODES]
    assert table.splitlines() == expected


LABELLED = ["allowlists.py", "codes.py", "fingerprint.py", "gateway.py", "gateway_channel.py",
            "ledger.py", "timings.py", "teamtools/lease_payload.py",
            "teamtools/call_rules.py", "teamtools/gates.py", "teamtools/leases.py"]


@pytest.mark.parametrize("module", LABELLED)
def test_rules_the_server_also_holds_say_so(module: str) -> None:
    """Every module holding a rule the control plane holds too says it is written twice on
    purpose (``fake_server`` and ``runner_ref`` share no code)."""
    text = " ".join((PACKAGE / module).read_text().split())
    assert "written independently in fake_server on purpose" in text
