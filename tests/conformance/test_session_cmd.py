"""The suite's session builder (conformance/session_cmd.py) and the reference runner's command
template (conformance/reference_cmd.py); certify's session comes from the builder with every
option certify has."""

from __future__ import annotations

import argparse
import configparser
import shlex
import sys
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest

from conformance import certify, plugin
from conformance.reference_cmd import REFERENCE_RUNNER_CMD, reference_runner_cmd
from conformance.session_cmd import (
    Options,
    collect_args,
    conformance_args,
    ini_text,
    session_args,
    session_argv,
)

CMD = "runner --config {config}"


def flags(options: Options) -> list[str]:
    return [f.metadata["flag"] for f in fields(options)]


class _Recorder:
    """Stands in for pytest's parser and option group: records the option names registered."""

    def __init__(self) -> None:
        self.names: list[str] = []

    def getgroup(self, *_: Any, **__: Any) -> _Recorder:
        return self

    def addoption(self, *names: str, **_: Any) -> None:
        self.names += [n for n in names if n.startswith("--")]

    def addini(self, *_: Any, **__: Any) -> None:
        pass


def test_the_shipped_suite_session() -> None:
    argv = session_argv(Options(CMD, "/out"), ini="/tmp/x/pytest.ini", rootdir="/src")
    assert argv == ["--pyargs", "conformance.cases", "--rootdir", "/src", "--assert=plain",
                    "-p", "no:respx", "-p", "no:anyio",
                    "-c", "/tmp/x/pytest.ini", "-p", "conformance.plugin",
                    "-p", "no:cacheprovider", "-p", "no:benchmark",
                    "--runner-cmd", CMD, "--conformance-out", "/out"]


def test_a_third_party_suite_is_collected_as_given() -> None:
    argv = session_argv(Options(CMD, "/out"), ini="/i", rootdir="/src", suite="tests/vendor")
    assert argv[0] == "tests/vendor" and argv[1:5] == session_args("/i")[:4]
    for shipped_only in ("--pyargs", "--rootdir", "--assert=plain", "no:respx", "no:anyio"):
        assert shipped_only not in argv
    assert collect_args("/src", None) == collect_args("/src", "")   # "" is no suite


def test_options_not_given_are_not_passed_and_the_rest_are() -> None:
    assert conformance_args(Options(CMD, "/o", hermes=None, cases="", exitfirst=False,
                                    example_dbs=())) == ["--runner-cmd", CMD,
                                                         "--conformance-out", "/o"]
    argv = conformance_args(Options(
        CMD, "/o", seed=0, exitfirst=True, example_dbs=("a", "readonly:b"),
        timeout_multiplier=2.5, runner_files=("r1",)))
    assert argv == ["--runner-cmd", CMD, "--conformance-out", "/o", "--conformance-seed", "0",
                    "--conformance-exitfirst", "--conformance-example-db", "a",
                    "--conformance-example-db", "readonly:b", "--timeout-multiplier", "2.5",
                    "--runner-file", "r1"]
    assert conformance_args(Options(CMD, "/o", timeout_multiplier=0.1))[-1] == repr(0.1)


def test_extra_options_come_last() -> None:
    argv = session_argv(Options(CMD, "/o", cases="GEN-*"), ini="/i", rootdir="/r",
                        extra=["-q", "-n", "2"])
    assert argv[-3:] == ["-q", "-n", "2"]
    assert argv[-5:-3] == ["--conformance-cases", "GEN-*"]


def test_every_option_of_the_plugin_is_one_field_and_back() -> None:
    """The builder speaks the plugin's spelling: no flag the plugin lacks, none of its left out."""
    registered = _Recorder()
    plugin.pytest_addoption(registered)  # type: ignore[arg-type]
    ours = flags(Options(CMD, "/o"))
    assert len(ours) == len(set(ours))
    assert set(ours) == set(registered.names)


def test_the_ini() -> None:
    plain, bounded = ini_text(), ini_text(timeout=180)
    assert "timeout" not in plain
    for text, extra in ((plain, {}), (bounded, {"timeout": "180"})):
        ini = configparser.ConfigParser()
        ini.read_string(text)
        assert dict(ini["pytest"]) == {"asyncio_mode": "auto",
                                       "asyncio_default_fixture_loop_scope": "function", **extra}
    assert ini_text(timeout=1.5).endswith("timeout = 1.5\n")


def test_the_reference_runner_command_is_one_template() -> None:
    assert shlex.split(REFERENCE_RUNNER_CMD) == [sys.executable, "-m", "runner_ref",
                                                 "--config", "{config}"]
    assert plugin.REFERENCE_RUNNER_CMD is REFERENCE_RUNNER_CMD  # the suite's default runner
    profiled = reference_runner_cmd("-m", "cProfile", "-o", "/tmp/a b.prof", python="/py 3/python")
    assert shlex.split(profiled) == ["/py 3/python", "-m", "cProfile", "-o", "/tmp/a b.prof",
                                     "-m", "runner_ref", "--config", "{config}"]


def certify_args(**over: Any) -> argparse.Namespace:
    args = certify.parser().parse_args([])
    args.seed, args.jobs = 7, 1
    for k, v in over.items():
        setattr(args, k, v)
    return args


def test_certify_runs_the_built_session_with_its_reporting_last(tmp_path: Path) -> None:
    args = certify_args()
    ini = tmp_path / "pytest.ini"
    argv = certify.pytest_args(args, CMD, tmp_path, ini)
    built = session_argv(certify.session_options(args, CMD, tmp_path), ini=str(ini),
                         rootdir=str(certify.ROOT))
    assert argv[:len(built)] == built
    assert argv[len(built):] == ["-p", "no:terminal", "--junitxml", str(tmp_path / "junit.xml"),
                                 "-o", "junit_suite_name=runner-conformance",
                                 "-o", "junit_logging=no"]
    assert certify.ROOT == Path(certify.__file__).resolve().parent.parent
    assert certify.INI == ini_text()


@pytest.mark.parametrize(("over", "expected"), [
    ({}, ["--hermes", "scripted", "--conformance-profile", "core", "--conformance-seed", "7",
          "--conformance-transcripts", "failing"]),
    ({"cases": "DED-*"}, ["--conformance-cases", "DED-*"]),
    ({"baseline": "b.txt"}, ["--conformance-baseline", "b.txt"]),
    ({"exitfirst": True}, ["--conformance-exitfirst"]),
    ({"example_db": ["d1", "d2"]},
     ["--conformance-example-db", "d1", "--conformance-example-db", "d2"]),
    ({"soak_round": True}, ["--conformance-soak"]),
    ({"fresh_worlds": True}, ["--conformance-fresh-worlds"]),
    ({"skip_unavailable": True}, ["--conformance-skip-unavailable"]),
    ({"timeout_multiplier": 3.0}, ["--timeout-multiplier", "3.0"]),
    ({"runner_file": ["f1", "f2"]}, ["--runner-file", "f1", "--runner-file", "f2"]),
    ({"shard": "1/2"}, ["--conformance-shard", "1/2"]),
    ({"durations": "d.json"}, ["--conformance-durations", "d.json"]),
    ({"catalogue": "m:C"}, ["--conformance-catalogue", "m:C"]),
    ({"world": "m:w"}, ["--conformance-world", "m:w"]),
    ({"jobs": 3}, ["-n", "3", "--dist", "worksteal"]),
])
def test_certify_passes_each_of_its_options(tmp_path: Path, over: dict[str, Any],
                                            expected: list[str]) -> None:
    argv = certify.pytest_args(certify_args(**over), CMD, tmp_path, tmp_path / "i")
    assert any(argv[i:i + len(expected)] == expected for i in range(len(argv))), argv


def test_certify_with_a_suite_collects_it(tmp_path: Path) -> None:
    argv = certify.pytest_args(certify_args(suite="vendor/tests"), CMD, tmp_path, tmp_path / "i")
    assert argv[0] == "vendor/tests" and "--pyargs" not in argv
