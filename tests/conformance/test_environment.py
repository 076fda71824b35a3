"""The environment table (conformance/environment.py): declared by the rows, checked by
certify before anything runs, the one source of scripts/setup.sh (issue 21 item 1)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from conformance import certify, environment
from conformance.case_row import Case
from conformance.catalogue import CATALOGUE, Catalogue, CatalogueError

ROOT = Path(__file__).resolve().parents[2]


def test_every_need_of_a_row_is_in_the_table() -> None:
    needs = {n for row in CATALOGUE for n in row.needs}
    assert needs and needs <= set(environment.PROGRAMS)
    with pytest.raises(CatalogueError, match="needs 'node'"):
        Catalogue([Case("GEN-001", "MUST", "X MUST y.", "2.4", "generations", needs=("node",))])


def test_the_core_profile_needs_faketime_for_its_clock_cases() -> None:
    need = environment.needed(CATALOGUE.in_profile("core"))
    assert set(need) == {"faketime"}
    assert {"INC-005", "FLT-005", "PROP-003"} <= set(need["faketime"])


def test_a_use_outside_the_table_is_refused() -> None:
    with pytest.raises(KeyError):
        environment.note_use("node")  # a house-test program, never a case's


def test_the_check_can_be_pointed_at_a_bare_machine(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(environment.ROOT_ENV, str(tmp_path))
    assert not environment.installed("faketime")
    (tmp_path / "usr/lib/x86_64-linux-gnu/faketime").mkdir(parents=True)
    (tmp_path / "usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1").write_bytes(b"")
    assert environment.installed("faketime")


def test_certify_exits_2_in_one_line_naming_the_package(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv(environment.ROOT_ENV, str(tmp_path))
    assert certify.main(["--out", str(tmp_path / "out"), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "Debian package 'faketime'" in err and "apt-get install -y faketime" in err
    assert not (tmp_path / "out" / "results.json").exists()  # nothing ran


def test_a_selection_without_such_cases_is_not_refused(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(environment.ROOT_ENV, str(tmp_path))
    args = certify.parser().parse_args(["--cases", "GEN-001"])
    certify.check_environment(args)  # no exception: GEN-001 needs nothing


def test_setup_sh_asks_the_table_what_to_install(tmp_path: Path) -> None:
    text = (ROOT / "scripts" / "setup.sh").read_text()
    assert "conformance environment --missing-packages" in text
    assert "install_debian --profile core" in text
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), environment.ROOT_ENV: str(tmp_path)}
    out = subprocess.run([sys.executable, "-m", "conformance", "environment", "--missing-packages"],
                         capture_output=True, text=True, env=env, check=True, cwd=ROOT)
    assert out.stdout.split() == ["faketime"]


def test_without_the_setup_the_answer_is_still_one_line(monkeypatch: pytest.MonkeyPatch,
                                                        tmp_path: Path) -> None:
    from conformance import preflight

    monkeypatch.setattr(preflight, "find_spec", lambda name: None if name == "rich" else object())
    monkeypatch.setenv(environment.ROOT_ENV, str(tmp_path))
    line = preflight.problem([])
    assert line is not None and "\n" not in line
    assert "Debian package 'faketime'" in line and "(rich): run scripts/setup.sh" in line
    monkeypatch.setattr(preflight, "find_spec", lambda name: object())
    assert preflight.problem([]) is None  # then certify checks everything itself
