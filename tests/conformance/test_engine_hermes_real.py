"""``--hermes real[:PATH]``: only ``@any_hermes`` cases run, the rest are not-applicable with the
reason; without a usable hermes-agent the any-Hermes cases are not-applicable too (pytest; that
certify then exits 2 with one line is a row of test_engine_certify's bad invocations);
``resolve_hermes`` and the world factory's dispatch."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from conformance.real_world import RealWorld, resolve_hermes
from conformance.world import World
from conformance.worlds import open_world

from .engine_sample import engine_args, make_project

pytest_plugins = ["pytester"]

CASES = '''
from conformance.marks import any_hermes, case

@any_hermes
@case("GEN-001")
async def test_any(world):
    assert world.options is not None

@case("GEN-002")
async def test_scripted_only(world):
    assert world.options is not None
'''


def fake_hermes(tmp: Path, version: str = "0.19.0") -> Path:
    """A venv-shaped directory with an executable ``bin/hermes`` and a dist-info version."""
    exe = tmp / "venv" / "bin" / "hermes"
    exe.parent.mkdir(parents=True)
    exe.write_text("#!/bin/sh\nexit 0\n")
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    (tmp / "venv" / "lib" / "python3.11" / "site-packages"
     / f"hermes_agent-{version}.dist-info").mkdir(parents=True)
    return exe


def run(pytester: pytest.Pytester, *extra: str) -> dict[str, dict[str, str]]:
    pytester.runpytest(*engine_args("--conformance-out", "out", *extra))
    doc = json.loads((pytester.path / "out" / "results.json").read_text())
    return {c["id"]: c for c in doc["cases"]}


def test_scripted_runs_every_case(pytester: pytest.Pytester) -> None:
    make_project(pytester, CASES)
    got = run(pytester)
    assert {k: c["status"] for k, c in got.items()} == {"GEN-001": "pass", "GEN-002": "pass"}


def test_real_runs_only_any_hermes_cases(pytester: pytest.Pytester, tmp_path: Path) -> None:
    make_project(pytester, CASES)
    exe = fake_hermes(tmp_path)
    got = run(pytester, "--hermes", f"real:{exe}")
    assert got["GEN-001"]["status"] == "pass"
    assert got["GEN-002"]["status"] == "not-applicable"
    assert "needs the scripted Hermes (pause points / effect log)" in got["GEN-002"]["detail"]
    assert f"--hermes real:{exe}" in got["GEN-001"]["replay"]


def test_real_without_hermes_makes_every_case_not_applicable(
        pytester: pytest.Pytester, tmp_path: Path) -> None:
    make_project(pytester, CASES)
    got = run(pytester, "--hermes", f"real:{tmp_path / 'nowhere'}")
    assert got["GEN-001"]["status"] == "not-applicable"
    assert "hermes-agent not found" in got["GEN-001"]["detail"]


def test_resolve_hermes(tmp_path: Path) -> None:
    exe = fake_hermes(tmp_path)
    assert resolve_hermes(f"real:{exe}") == (exe, "")
    assert resolve_hermes(f"real:{exe.parent.parent}") == (exe, "")  # a venv directory
    other = fake_hermes(tmp_path / "old", version="0.18.2")
    found, why = resolve_hermes(f"real:{other}")
    assert found is None and "0.18.2" in why and "0.19.0 needed" in why
    assert resolve_hermes("real:")[0] is None
    assert resolve_hermes("bogus")[0] is None


def test_open_world_dispatches_on_hermes() -> None:
    scripted = open_world("x {config}", hermes="scripted", seed=1, model_script=object())
    assert type(scripted) is World
    real = open_world("x {config}", hermes="real:/nowhere", seed=1)
    assert isinstance(real, RealWorld) and real.hermes_mode == "real:/nowhere"
    with pytest.raises(ValueError):
        open_world("x {config}", hermes="simulated")
    with pytest.raises(ValueError):
        RealWorld("x {config}", hermes_auth="account")
