"""``results.json``: the machine-readable verdicts of one run (schema version 2).

Rules of this module:
- One record per case: id, level, family, feature, section, requirement, status, expected,
  actual, witness, transcript (redacted JSON objects; or its digest, see
  :mod:`conformance.transcripts`), seed, duration, replay command, nodeid.
- Statuses: ``pass``, ``fail``, ``not-applicable``, ``expected-fail`` (baselined and failing),
  ``stale`` (baselined but passing: fails the run). A case's status is the worst of its phases
  in the order of :data:`PRECEDENCE`.
- The run passes (exit 0) only when no applicable MUST is ``fail`` and nothing is ``stale``.
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
from collections.abc import Iterable
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
STATUSES = ("pass", "fail", "not-applicable", "expected-fail", "stale")
#: worst first: the status of a case is the first of these any of its phases produced.
PRECEDENCE = ("fail", "expected-fail", "stale", "not-applicable", "pass")


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
    schema_version: int = SCHEMA_VERSION

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
        return not any(
            (c.status == "fail" and c.level == "MUST") or c.status == "stale" for c in self.cases
        )

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["summary"] = {
            "counts": self.counts(),
            "must": dict(zip(("passed", "total"), self.level_figures("MUST"), strict=True)),
            "should": dict(zip(("passed", "total"), self.level_figures("SHOULD"), strict=True)),
            "ok": self.ok(),
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
