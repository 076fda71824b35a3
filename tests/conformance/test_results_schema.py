"""results.json schema 2 against a real world's evidence: every transcript item is a JSON object
of a ``$defs`` type (exchange, lifecycle, effect, output), redacted, and the document validates;
the schema refuses an item of no known type; the one redactor's rules."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest

from conformance.casefixtures import transcript_of
from conformance.reference_cmd import REFERENCE_RUNNER_CMD
from conformance.results import CaseResult, RunResults, validate
from conformance.secrets import MIN_SECRET, REDACTED, Secrets, redact, redact_data
from conformance.transcripts import keep
from conformance.worlds import open_world

REF = REFERENCE_RUNNER_CMD


def doc_with(transcript: list[Any], digest: dict[str, Any] | None = None) -> dict[str, Any]:
    case = CaseResult(id="GEN-001", level="MUST", family="generations", feature="core",
                      section="2.4", requirement="r", status="fail", transcript=transcript,
                      transcript_digest=digest)
    return RunResults(runner_cmd=REF, profile="core", harness_version="0", seed=1,
                      started="2026-12-02T00:00:00+00:00", cases=[case]).to_dict()


async def test_a_real_worlds_evidence_validates_as_data() -> None:
    async with open_world(REF) as world:
        root = world.artifact_root
        (root / "a.txt").write_text("artifact\n")
        out = await world.cp.command(world.runner_id, "http", {
            "path": "/api/files/download", "method": "GET",
            "search": f"?profile=default&path={root / 'a.txt'}"})
        assert out.ok, out
        items = transcript_of(world)
        secrets = list(world.secrets)
    assert {"exchange", "lifecycle", "effect", "output"} <= {i["type"] for i in items}
    seqs = [i["seq"] for i in items if i["type"] != "output"]
    assert seqs == sorted(seqs)
    blob = json.dumps(items)
    assert not any(s in blob for s in secrets)
    doc = json.loads(json.dumps(doc_with(items)))  # what a JSON consumer reads back
    validate(doc)
    exchange = next(i for i in doc["cases"][0]["transcript"] if i["type"] == "exchange")
    assert {"seq", "route", "method", "status", "code"} <= exchange.keys()
    kept, digest = keep("failing", "pass", items)
    assert kept == [] and digest is not None and digest["items"] == len(items)
    validate(doc_with(kept, digest))


def test_the_schema_refuses_an_item_of_no_known_type() -> None:
    validate(doc_with(["a foreign world's text line"]))
    with pytest.raises(jsonschema.ValidationError):
        validate(doc_with([{"type": "exchange", "seq": 1}]))  # no route, method, time
    with pytest.raises(jsonschema.ValidationError):
        validate(doc_with([{"type": "telepathy", "seq": 1}]))


def test_one_redactor_one_minimum() -> None:
    long, short = "s3cret-" + "x" * MIN_SECRET, "x" * (MIN_SECRET - 1)
    assert redact(f"a {long} b {short}", {long, short}) == f"a {REDACTED} b {short}"
    assert redact_data({long: [long, 1, None, b"%s" % long.encode()]}, [long]) == {
        REDACTED: [REDACTED, 1, None, REDACTED]}
    registry = Secrets()
    registry.add("token", long)
    assert Secrets.of(registry) is registry and redact(long, registry) == REDACTED
