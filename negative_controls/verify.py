"""The self-test's driver: run each control's catching cases through the conformance engine.

Rules of this module:
- A control is run as a black box, like any vendor runner: one pytest session of the suite,
  built by the same builder as certify's (conformance/session_cmd.py; quiet, and its ini bounds
  each case with pytest-timeout's ``timeout = 180``), with
  ``--runner-cmd "<python> -m negative_controls NAME --config {config}"``, the control's case IDs
  as ``--conformance-cases`` and ``--conformance-out``; the verdicts are read from the
  session's ``results.json`` (one session per control, never one per case).
- A declared case is *caught* when its status is ``fail``; ``pass``, ``not-applicable``,
  ``error``, ``timeout`` or a case that did not run is *escaped* — except the flagged pairs of
  :data:`TIMEOUT_CATCHES`, where a ``timeout`` still counts (a debt: each such case should read
  the evidence after its bound and fail with a witness). A declared case absent from the
  catalogue is *missing* (not written yet).
- The reference runner (``python -m runner_ref``, conformance/reference_cmd.py) runs the union
  of the declared cases that exist, and must pass every one of them.
- ``python -m negative_controls.verify [NAME …] [-j N] [--lanes K]`` prints the table control →
  catching cases → verdict and exits 1 when a control escapes or the reference fails a case;
  each session runs its cases on certify's default lanes (three per core), ``--lanes K`` (or
  ``NEGCTL_LANES``) on K (1: one after the other).
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from conformance.catalogue import CATALOGUE
from conformance.lanes import default_lanes
from conformance.reference_cmd import REFERENCE_RUNNER_CMD
from conformance.session_cmd import Options, ini_text, session_argv

from .control import Control
from .registry import BY_NAME, CONTROLS

ROOT = Path(__file__).resolve().parent.parent
SESSION_TIMEOUT = 900.0
#: pytest-timeout's bound of one case in the self-test's sessions (seconds)
CASE_TIMEOUT = 180
INI = ini_text(timeout=CASE_TIMEOUT)
NOT_WRITTEN = "case not written yet"


def catalogued() -> set[str]:
    """The case IDs of the catalogue."""
    return set(CATALOGUE.ids())


def runner_cmd(control: str | None) -> str:
    """The control's ``--runner-cmd``; ``None`` is the reference runner."""
    if control is None:
        return REFERENCE_RUNNER_CMD
    py = shlex.quote(sys.executable)
    return f"{py} -m negative_controls {shlex.quote(control)} --config {{config}}"


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    env.pop("PYTEST_XDIST_WORKER", None)
    env.pop("PYTEST_ADDOPTS", None)
    return env


@dataclass(frozen=True)
class Outcome:
    status: str
    why: str = ""   # expected → actual (or the first line of the detail) of a failure


def _why(case: dict[str, object]) -> str:
    expected, actual = str(case.get("expected") or ""), str(case.get("actual") or "")
    if expected or actual:
        return f"expected {expected[:80]}; actual {actual[:80]}"
    detail = str(case.get("detail") or "").strip().splitlines()
    return detail[-1][:160] if detail else ""


#: cases in flight in each control's session (conformance/lanes.py): ``--lanes K`` or
#: ``NEGCTL_LANES``, else what certify runs one process with on this machine
#: (``lanes.default_lanes``): the cases are shown to catch the bug as a vendor's run meets it
LANES: int = int(os.environ.get("NEGCTL_LANES") or default_lanes(1))


def pytest_args(cmd: str, ids: Iterable[str], out: Path, ini: Path) -> list[str]:
    """The session of ``ids`` against ``cmd`` (conformance/session_cmd.py), quiet."""
    options = Options(runner_cmd=cmd, out=str(out), cases=",".join(ids), lanes=LANES)
    return session_argv(options, ini=str(ini), rootdir=str(ROOT), extra=["-q"])


def run_cases(cmd: str, ids: Iterable[str], timeout: float = SESSION_TIMEOUT) -> dict[str, Outcome]:
    """One pytest session of the suite for ``ids`` against ``cmd``: case id → outcome."""
    ids = sorted(set(ids))
    if not ids:
        return {}
    with tempfile.TemporaryDirectory(prefix="negctl-") as tmp:
        out = Path(tmp) / "out"
        ini = Path(tmp) / "pytest.ini"
        ini.write_text(INI)
        argv = [sys.executable, "-m", "pytest", *pytest_args(cmd, ids, out, ini)]
        proc = subprocess.run(argv, cwd=tmp, env=_env(), capture_output=True, text=True,
                              timeout=timeout, check=False)
        try:
            doc = json.loads((out / "results.json").read_text())
        except (OSError, ValueError):
            raise RuntimeError(f"no results.json from the suite (exit {proc.returncode}):\n"
                               f"{proc.stdout[-3000:]}\n{proc.stderr[-2000:]}") from None
    return {c["id"]: Outcome(c["status"], _why(c)) for c in doc.get("cases", [])}


#: (control, case) pairs caught only by a harness wait running out (``timeout``), counted as
#: caught, flagged: a debt (the case should prove the fault after its bound: the command was
#: delivered, the runner alive, no admit/result → an expectation with that witness, and be
#: ``fail``). Empty since 2026-12-02: the 13 pairs measured then (and GEN-006/GEN-007, declared
#: later) each fail with evidence now; a pair added here must say why it cannot.
TIMEOUT_CATCHES: frozenset[tuple[str, str]] = frozenset()


@dataclass
class Verdict:
    name: str
    declared: tuple[str, ...]
    missing: list[str] = field(default_factory=list)
    outcomes: dict[str, Outcome] = field(default_factory=dict)
    seconds: float = 0.0
    reason: str = ""

    @property
    def statuses(self) -> dict[str, str]:
        return {c: o.status for c, o in self.outcomes.items()}

    def _catches(self, case: str) -> bool:
        status = self.statuses.get(case)
        return status == "fail" or (status == "timeout" and (self.name, case) in TIMEOUT_CATCHES)

    @property
    def caught(self) -> list[str]:
        return [c for c in self.declared if self._catches(c)]

    @property
    def escaped(self) -> list[str]:
        return [c for c in self.declared if c not in self.missing and not self._catches(c)]

    @property
    def word(self) -> str:
        if self.escaped:
            return "ESCAPED " + ",".join(f"{c}={self.statuses.get(c, 'not run')}"
                                         for c in self.escaped)
        if self.missing:
            return ("caught " + ",".join(self.caught) + "; " if self.caught else "") + \
                f"xfail ({self.reason}: {','.join(self.missing)})"
        return "caught by " + ",".join(self.caught)


def verify(control: Control, known: set[str] | None = None) -> Verdict:
    """Run ``control``'s declared cases against it."""
    known = catalogued() if known is None else known
    v = Verdict(control.name, control.cases, reason=NOT_WRITTEN)
    v.missing = [c for c in control.cases if c not in known]
    present = [c for c in control.cases if c not in v.missing]
    start = time.monotonic()
    v.outcomes = run_cases(runner_cmd(control.name), present)
    v.seconds = time.monotonic() - start
    return v


def verify_reference(controls: Iterable[Control] = CONTROLS,
                     known: set[str] | None = None) -> Verdict:
    """The reference runner against the union of the declared cases that exist."""
    rows = list(controls)
    declared = tuple(sorted({c for row in rows for c in row.cases}))
    known = catalogued() if known is None else known
    v = Verdict("(reference runner_ref)", declared, reason=NOT_WRITTEN)
    v.missing = [c for c in declared if c not in known]
    start = time.monotonic()
    v.outcomes = run_cases(runner_cmd(None), [c for c in declared if c not in v.missing])
    v.seconds = time.monotonic() - start
    return v


def reference_failures(v: Verdict) -> list[str]:
    """Declared cases the reference runner does not pass (written cases that did not run too)."""
    return [f"{c}={v.statuses.get(c, 'not run')}" for c in v.declared
            if c not in v.missing and v.statuses.get(c) != "pass"]


def reference_row(v: Verdict) -> str:
    bad = reference_failures(v)
    ran = len(v.declared) - len(v.missing)
    word = f"FAILS {', '.join(bad)}" if bad else f"passes all {ran} written cases"
    return (f"{v.name:34} {f'{len(v.declared)} declared cases':30} {word}; "
            f"{len(v.missing)} not written yet [{v.seconds:.1f} s]")


def table(verdicts: Iterable[Verdict], reasons: bool = False) -> str:
    rows = [f"{'control':34} {'catching cases':30} verdict"]
    for v in verdicts:
        rows.append(f"{v.name:34} {','.join(v.declared):30} {v.word} [{v.seconds:.1f} s]")
        if reasons:
            rows += [f"{'':36}{c}: {o.why}" for c, o in sorted(v.outcomes.items()) if o.why]
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m negative_controls.verify")
    p.add_argument("names", nargs="*", help="controls to verify (default: all)")
    p.add_argument("-j", "--jobs", type=int, default=2)
    p.add_argument("--why", action="store_true", help="show why each case failed")
    p.add_argument("--lanes", type=int, default=None, metavar="K",
                   help="cases in flight in each session (default: $NEGCTL_LANES, else "
                        "certify's default for one process: three per core)")
    args = p.parse_args(argv)
    global LANES  # noqa: PLW0603 - the sessions of this run
    if args.lanes is not None:
        LANES = args.lanes
    rows = [BY_NAME[n] for n in args.names] if args.names else list(CONTROLS)
    known = catalogued()
    with ThreadPoolExecutor(max(1, args.jobs)) as pool:
        verdicts = list(pool.map(lambda c: verify(c, known), rows))
    ref = verify_reference(rows, known)
    print(table(verdicts, reasons=args.why))
    print(reference_row(ref))
    bad_ref = reference_failures(ref)
    return 1 if bad_ref or any(v.escaped for v in verdicts) else 0


if __name__ == "__main__":
    sys.exit(main())
