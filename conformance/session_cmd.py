"""The suite's pytest session, written once: its argv and its ini (certify, the negative controls).

Rules of this module:
- Sans-IO: :func:`session_argv` returns pytest's arguments and :func:`ini_text` the ini's text;
  the caller writes the ini to a file and runs the session (``pytest.main(argv)`` in process, or
  ``python -m pytest *argv`` as a subprocess).
- Where the cases come from (:func:`collect_args`): the shipped suite is ``--pyargs
  conformance.cases --rootdir ROOT``, with ``--assert=plain`` (the cases judge with
  ``expect()``/``CaseFailed``, never with an assert's introspection: no module of the
  distribution is rewritten in each worker) and without the plugins no case uses
  (:data:`UNUSED_BY_CASES`: respx and anyio import httpx and trio). A third-party suite (a path
  or node id) is collected as given; its assertion rewriting and its plugins are left to it.
- Every session (:func:`session_args`) reads the ini it is given and only that one (``-c INI``:
  never a ``pyproject.toml`` or ``pytest.ini`` of the working directory), loads
  ``conformance.plugin`` and does not load the plugins no session uses (:data:`UNUSED`: the
  cache provider, pytest-benchmark).
- The conformance options come from one :class:`Options` (:func:`conformance_args`): a field
  that is ``None``, ``False``, ``""`` or ``()`` is not passed, so the plugin's own default
  applies; any other is passed as the option named in the field's ``flag`` — the spelling
  ``conformance.plugin`` registers. ``True`` is the bare flag, a tuple repeats the flag once per
  item, a float is written with ``repr`` (exact), anything else with ``str``.
- The order is fixed: where the cases come from, the session, the conformance options, then the
  driver's own pytest options (``extra``: its reporting, xdist) last.
- The ini (:func:`ini_text`) sets the pytest-asyncio mode and loop scope the cases are written
  for, and pytest-timeout's per-test ``timeout`` (seconds) only when one is given.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from typing import Final

#: the shipped cases, collected by package name
CASES_PACKAGE: Final = "conformance.cases"
PLUGIN: Final = "conformance.plugin"
#: plugins no session of the suite uses: never loaded
UNUSED: Final = ("cacheprovider", "benchmark")
#: plugins the shipped cases do not use (a third-party suite may)
UNUSED_BY_CASES: Final = ("respx", "anyio")


def _flag(name: str) -> dict[str, str]:
    return {"flag": name}


@dataclass(frozen=True)
class Options:
    """The conformance plugin's options of one session (conformance/plugin.py ``pytest_addoption``)."""

    runner_cmd: str = field(metadata=_flag("--runner-cmd"))
    out: str = field(metadata=_flag("--conformance-out"))   # where results.json goes
    hermes: str | None = field(default=None, metadata=_flag("--hermes"))
    profile: str | None = field(default=None, metadata=_flag("--conformance-profile"))
    seed: int | None = field(default=None, metadata=_flag("--conformance-seed"))
    transcripts: str | None = field(default=None, metadata=_flag("--conformance-transcripts"))
    cases: str | None = field(default=None, metadata=_flag("--conformance-cases"))
    baseline: str | None = field(default=None, metadata=_flag("--conformance-baseline"))
    exitfirst: bool = field(default=False, metadata=_flag("--conformance-exitfirst"))
    example_dbs: tuple[str, ...] = field(default=(), metadata=_flag("--conformance-example-db"))
    soak: bool = field(default=False, metadata=_flag("--conformance-soak"))
    fresh_worlds: bool = field(default=False, metadata=_flag("--conformance-fresh-worlds"))
    skip_unavailable: bool = field(default=False,
                                   metadata=_flag("--conformance-skip-unavailable"))
    timeout_multiplier: float | None = field(default=None, metadata=_flag("--timeout-multiplier"))
    lanes: int | None = field(default=None, metadata=_flag("--conformance-lanes"))
    runner_files: tuple[str, ...] = field(default=(), metadata=_flag("--runner-file"))
    shard: str | None = field(default=None, metadata=_flag("--conformance-shard"))
    durations: str | None = field(default=None, metadata=_flag("--conformance-durations"))
    catalogue: str | None = field(default=None, metadata=_flag("--conformance-catalogue"))
    world: str | None = field(default=None, metadata=_flag("--conformance-world"))


def disabled(names: Sequence[str]) -> list[str]:
    """``-p no:NAME`` for each plugin name."""
    return [a for name in names for a in ("-p", f"no:{name}")]


def collect_args(rootdir: str, suite: str | None = None) -> list[str]:
    """Where the cases come from: the shipped suite under ``rootdir``, else ``suite`` as given."""
    if suite:
        return [suite]
    return ["--pyargs", CASES_PACKAGE, "--rootdir", rootdir, "--assert=plain",
            *disabled(UNUSED_BY_CASES)]


def session_args(ini: str) -> list[str]:
    """What every session of the suite has: the ini ``ini``, the plugin, no unused plugin."""
    return ["-c", ini, "-p", PLUGIN, *disabled(UNUSED)]


def conformance_args(options: Options) -> list[str]:
    """The plugin's options of ``options``, each field not at its "not given" value."""
    argv: list[str] = []
    for f in fields(options):
        flag, value = f.metadata["flag"], getattr(options, f.name)
        if value is None or value is False or value in ("", ()):
            continue
        if value is True:
            argv.append(flag)
        elif isinstance(value, tuple):
            argv += [a for item in value for a in (flag, str(item))]
        else:
            argv += [flag, repr(value) if isinstance(value, float) else str(value)]
    return argv


def session_argv(options: Options, *, ini: str, rootdir: str, suite: str | None = None,
                 extra: Sequence[str] = ()) -> list[str]:
    """pytest's arguments for one session of the suite (without ``python -m pytest``)."""
    return [*collect_args(rootdir, suite), *session_args(ini), *conformance_args(options), *extra]


def ini_text(timeout: float | None = None) -> str:
    """The session's ini; ``timeout`` is pytest-timeout's per-test bound in seconds."""
    lines = ["[pytest]", "asyncio_mode = auto", "asyncio_default_fixture_loop_scope = function"]
    if timeout is not None:
        lines.append(f"timeout = {timeout:g}")
    return "\n".join(lines) + "\n"
