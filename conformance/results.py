"""``results.json``: the machine-readable verdicts of one run (schema version 2).

Rules of this module:
- One record per case: id, level, family, feature, section, requirement, status, expected,
  actual, witness, transcript (redacted JSON objects; or its digest, see
  :mod:`conformance.transcripts`), seed, duration, replay command, nodeid.
- Statuses are the rows of :data:`STATUS_TABLE` (what each means, its JUnit element, what it
  does to the verdict): the runner's (``pass``, ``fail``), the harness's (``error``: the
  harness could not judge; ``timeout``: a wait of the harness ran out and nothing shows the
  runner at fault), and the run's (``not-run``, ``not-applicable``, ``expected-fail``,
  ``stale``). A case's status is the worst of its phases in the order of :data:`PRECEDENCE`.
- The verdict is the first row of :data:`VERDICTS` that holds: FAIL (exit 1) when an
  applicable MUST is ``fail`` or a baseline entry is ``stale``; INCOMPLETE (exit 3) when a case
  could not be judged (``error``, ``timeout``, ``not-run``); BASELINED (exit 0, "conforms
  except N baselined MUST cases") when a MUST is ``expected-fail``; PASS (exit 0) otherwise.
  A failing SHOULD or MAY is reported, counted on the certificate, and does not fail the run.
- Every string that leaves the harness passes through the one redactor
  (:func:`conformance.secrets.redact`, re-exported here) with the run's secrets.
- The JSON Schema (``conformance/report/results.schema.json``, copied to ``docs/``) is the
  contract; :func:`validate` checks a document against it.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field, fields
from importlib import resources
from pathlib import Path
from typing import Any

# the one redactor (conformance/secrets.py), re-exported for the report and the plugin
from .secrets import REDACTED as REDACTED
from .secrets import redact as redact
from .secrets import redact_data as redact_data

SCHEMA_VERSION = 2
#: versions :func:`load` reads (a version-1 file: transcript items are text, no digests)
READABLE_VERSIONS = (1, 2)


@dataclass(frozen=True)
class Status:
    name: str
    junit: str | None  # the JUnit element of a case with this status (None: a plain testcase)
    judged: bool       # whether the runner was judged (False: the run is INCOMPLETE)
    meaning: str


STATUS_TABLE: tuple[Status, ...] = (
    Status("pass", None, True, "the runner meets the requirement"),
    Status("fail", "failure", True, "the runner breaks the requirement (expected vs actual, "
           "witness), or exited while the harness waited on it"),
    Status("error", "error", False, "the harness could not judge: a program missing, no free "
           "port, an exception of the harness itself"),
    Status("timeout", "error", False, "a wait of the harness ran out and nothing the case saw "
           "shows the runner at fault (scale the bounds with --timeout-multiplier)"),
    Status("not-run", "skipped", False, "not run: a program it needs is not installed "
           "(--skip-unavailable), or the session ended before it (interrupted, -x)"),
    Status("not-applicable", "skipped", True, "the runner does not offer the feature the case needs"),
    Status("expected-fail", "skipped", True, "baselined and failing (a known failure, still a failure)"),
    Status("stale", "failure", True, "baselined but passing: remove it from the baseline"),
)
STATUSES = tuple(s.name for s in STATUS_TABLE)
BY_STATUS = {s.name: s for s in STATUS_TABLE}
#: worst first: the status of a case is the first of these any of its phases produced.
PRECEDENCE = ("fail", "error", "timeout", "expected-fail", "stale", "not-run", "not-applicable",
              "pass")


def combine(phase_statuses: Iterable[str]) -> str:
    seen = set(phase_statuses)
    for status in PRECEDENCE:
        if status in seen:
            return status
    return "pass"


@dataclass
class CaseResult:
    id: str
    level: str
    family: str
    feature: str
    section: str
    requirement: str
    status: str
    nodeid: str = ""
    upstream: str | None = None
    expected: str = ""
    actual: str = ""
    witness: list[str] = field(default_factory=list)
    #: JSON objects (schema ``$defs``: exchange, lifecycle, effect, output, model) or text
    transcript: list[Any] = field(default_factory=list)
    transcript_digest: dict[str, Any] | None = None  # when the transcript was not kept
    detail: str = ""
    seed: int = 0
    duration: float = 0.0
    replay: str = ""
    data: dict[str, Any] = field(default_factory=dict)  # figures a case attached (judge.attach)


@dataclass
class RunResults:
    runner_cmd: str
    profile: str
    harness_version: str
    started: str
    seed: int
    duration: float = 0.0
    hermes: str = "scripted"
    baseline: str | None = None
    cases: list[CaseResult] = field(default_factory=list)
    #: a soak's rounds, seeds and findings (``certify --soak``, conformance/soak.py); else None
    soak: dict[str, Any] | None = None
    schema_version: int = SCHEMA_VERSION
    #: a shard's bundle: ``{index, total, cases, selection, durations_sha256}`` (conformance/shards.py)
    shard: dict[str, Any] | None = None
    #: a merged bundle: one ``{index, total, cases, started, duration}`` per shard it joins
    shards: list[dict[str, Any]] | None = None

    def counts(self) -> dict[str, int]:
        out = {s: 0 for s in STATUSES}
        for c in self.cases:
            out[c.status] = out.get(c.status, 0) + 1  # a newer status too
        return out

    def level_figures(self, level: str) -> tuple[int, int]:
        """(passed, total) over the applicable cases of one level; baselined ones count as not passed."""
        applicable = [c for c in self.cases if c.level == level and c.status != "not-applicable"]
        return sum(c.status == "pass" for c in applicable), len(applicable)

    def ok(self) -> bool:
        """Whether the run exits 0 (PASS, or BASELINED)."""
        return VERDICT_BY_NAME[self.verdict()].exit == 0

    def verdict(self) -> str:
        return next(v.name for v in VERDICTS if v.holds(self))

    def baselined_must(self) -> list[str]:
        return [c.id for c in self.cases if c.level == "MUST" and c.status == "expected-fail"]

    def unjudged(self) -> list[str]:
        return [c.id for c in self.cases
                if c.status not in BY_STATUS or not BY_STATUS[c.status].judged]

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        for key in ("shard", "shards"):  # only a shard's or a merged bundle has them
            if d[key] is None:
                del d[key]
        d["summary"] = {
            "counts": self.counts(),
            "must": dict(zip(("passed", "total"), self.level_figures("MUST"), strict=True)),
            "should": dict(zip(("passed", "total"), self.level_figures("SHOULD"), strict=True)),
            "ok": self.ok(),
            "verdict": self.verdict(),
        }
        order = ["schema_version"] + [k for k in d if k != "schema_version"]
        return {k: d[k] for k in order}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunResults:
        """A document read back; keys this version does not know (a newer writer's) are left
        out, a missing required one or a case that is not an object is a ``TypeError``."""
        run_keys = {f.name for f in fields(cls)} - {"cases"}
        case_keys = {f.name for f in fields(CaseResult)}
        cases = data.get("cases", [])
        if not isinstance(cases, list) or not all(isinstance(c, dict) for c in cases):
            raise TypeError("cases is not a list of objects")
        return cls(cases=[CaseResult(**{k: v for k, v in c.items() if k in case_keys})
                          for c in cases],
                   **{k: v for k, v in data.items() if k in run_keys})


@dataclass(frozen=True)
class Verdict:
    name: str
    exit: int
    holds: Callable[[RunResults], bool]
    headline: str


VERDICTS: tuple[Verdict, ...] = (
    Verdict("fail", 1, lambda r: any((c.status == "fail" and c.level == "MUST")
                                     or c.status == "stale" for c in r.cases),
            "an applicable MUST fails or a baseline entry is stale"),
    Verdict("incomplete", 3, lambda r: bool(r.unjudged()),
            "not every case could be judged (error, timeout or not-run): no verdict on those"),
    Verdict("baselined", 0, lambda r: bool(r.baselined_must()),
            "conforms except the baselined MUST cases"),
    Verdict("pass", 0, lambda r: True, "every applicable MUST passes"),
)
VERDICT_BY_NAME = {v.name: v for v in VERDICTS}


def verdict_line(results: RunResults) -> str:
    """The verdict in words, e.g. ``CONFORMS EXCEPT 2 BASELINED MUST CASES (DED-001, GEN-002)``."""
    name = results.verdict()
    if name == "baselined":
        ids = results.baselined_must()
        return f"CONFORMS EXCEPT {len(ids)} BASELINED MUST CASE{'S' if len(ids) > 1 else ''} " \
               f"({', '.join(ids)})"
    if name == "incomplete":
        ids = results.unjudged()
        return f"INCOMPLETE: {len(ids)} case{'s' if len(ids) > 1 else ''} not judged"
    return name.upper()


def schema() -> dict[str, Any]:
    text = resources.files("conformance.report").joinpath("results.schema.json").read_text()
    loaded: dict[str, Any] = json.loads(text)
    return loaded


def validate(doc: dict[str, Any]) -> None:
    """Raise ``jsonschema.ValidationError`` unless ``doc`` is a valid results document."""
    import jsonschema

    jsonschema.validate(doc, schema())


def dumps(results: RunResults) -> str:
    """The document as text: indented, but each transcript item compact on one line (a
    transcript is most of a kept run's bytes; one item a line also reads and diffs well)."""
    doc = results.to_dict()
    items: list[str] = []
    mark = f"@@item-{os.urandom(6).hex()}-"
    for case in doc["cases"]:
        for i, item in enumerate(case["transcript"]):
            items.append(json.dumps(item, ensure_ascii=False, separators=(",", ":")))
            case["transcript"][i] = f"{mark}{len(items) - 1}"
    text = json.dumps(doc, indent=2, ensure_ascii=False)
    return re.sub(f'"{re.escape(mark)}(\\d+)"', lambda m: items[int(m[1])], text) + "\n"


def dump(results: RunResults, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(dumps(results))


class ResultsError(ValueError):
    """A results file cannot be read (one-line message)."""


def load(path: str | Path) -> RunResults:
    p = Path(path)
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ResultsError(f"cannot read results {p}: {exc.strerror or type(exc).__name__}") from None
    except UnicodeDecodeError:
        raise ResultsError(f"cannot read results {p}: not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        raise ResultsError(f"cannot read results {p}: not JSON (line {exc.lineno}: {exc.msg})") from None
    if not isinstance(data, dict) or data.get("schema_version") not in READABLE_VERSIONS:
        versions = " or ".join(str(v) for v in READABLE_VERSIONS)
        raise ResultsError(f"{p}: not a results.json of schema version {versions}")
    try:
        return RunResults.from_dict(data)
    except TypeError as exc:
        raise ResultsError(f"{p}: malformed results ({exc})") from None
