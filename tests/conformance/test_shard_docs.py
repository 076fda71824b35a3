"""docs/certification.md's sharding examples work as written: every YAML block parses, the GitHub
Actions workflow runs the shards as a matrix and merges their artifacts, the Kubernetes Jobs
are an Indexed Job over ``JOB_COMPLETION_INDEX`` and a merge Job on one shared volume, and
every certify and merge command in them is accepted by certify's and merge's own parsers."""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import pytest

from conformance import certify, merge

yaml = pytest.importorskip("yaml")

DOC = Path(__file__).resolve().parents[2] / "docs" / "certification.md"
#: what the CI system puts in for its expressions, to parse the commands as the shell gets them
SUBSTITUTE = {"${{ matrix.shard }}": "3", "${{ github.run_number }}": "17",
              "$((JOB_COMPLETION_INDEX + 1))": "3", "$SEED": "20261202", "$RUN": "run-1"}


def blocks() -> list[Any]:
    found = re.findall(r"```yaml\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    return [yaml.safe_load(text) for text in found]


def workflow(name: str) -> dict[str, Any]:
    return next(b for b in blocks() if "jobs" in b and b.get("name") == name)


def kube_job(name: str) -> dict[str, Any]:
    return next(b for b in blocks() if b.get("kind") == "Job" and b["metadata"]["name"] == name)


def substituted(text: str) -> str:
    for key, value in SUBSTITUTE.items():
        text = text.replace(key, value)
    return text


def commands(text: str, verb: str) -> list[list[str]]:
    """The argv after ``python -m conformance VERB`` of each such command in ``text``."""
    text = substituted(text)
    out = []
    for line in re.split(r";|\n(?=python)", text):
        words = shlex.split(line.strip())
        if words[:4] == ["python", "-m", "conformance", verb]:
            out.append(words[4:])
    return out


def test_every_yaml_block_parses() -> None:
    assert len(blocks()) >= 4  # the CI example, the matrix, the two Kubernetes Jobs


def test_the_github_matrix_shards_then_merges() -> None:
    jobs = workflow("runner-conformance-sharded")["jobs"]
    shards = jobs["certify"]["strategy"]["matrix"]["shard"]
    assert shards == [1, 2, 3, 4]
    steps = jobs["certify"]["steps"]
    runs = [argv for s in steps if "run" in s for argv in commands(s["run"], "certify")]
    assert len(runs) == 1
    args = certify.parser().parse_args(runs[0])
    assert certify.parse_shard(args.shard).total == len(shards) and args.seed == 17
    upload = next(s for s in steps if s.get("uses", "").startswith("actions/upload-artifact"))
    assert substituted(upload["with"]["path"]) == args.out == "shard-3"
    m = jobs["merge"]
    assert m["needs"] == "certify" and m["if"] == "always()"
    download = next(s for s in m["steps"] if s.get("uses", "").startswith(
        "actions/download-artifact"))
    merges = [argv for s in m["steps"] if "run" in s for argv in commands(s["run"], "merge")]
    ns = merge.parser().parse_args(merges[0])
    assert ns.bundles == [f"{download['with']['path']}/{download['with']['pattern']}"]
    assert upload["with"]["name"].replace("${{ matrix.shard }}", "*") == download["with"]["pattern"]


def _container(job: dict[str, Any]) -> dict[str, Any]:
    spec = job["spec"]["template"]["spec"]
    assert spec["restartPolicy"] == "Never"
    (container,) = spec["containers"]
    mount = container["volumeMounts"][0]
    (volume,) = spec["volumes"]
    assert mount["name"] == volume["name"] and "persistentVolumeClaim" in volume
    return container


def test_the_kubernetes_indexed_job_and_its_merge() -> None:
    shards_job, merge_job = kube_job("runner-conformance"), kube_job("runner-conformance-merge")
    spec = shards_job["spec"]
    assert spec["completionMode"] == "Indexed" and spec["completions"] == 4
    container = _container(shards_job)
    (script,) = container["args"]
    assert "JOB_COMPLETION_INDEX" in script
    (argv,) = commands(script, "certify")
    args = certify.parser().parse_args(argv)
    assert args.shard == "3/4" and args.seed == 20261202 and args.out == "/bundles/run-1/shard-3"
    (margv,) = commands(_container(merge_job)["args"][0], "merge")
    ns = merge.parser().parse_args(margv)
    assert ns.bundles == [f"/bundles/run-1/shard-{k}" for k in range(1, 5)]
    assert _container(merge_job)["volumeMounts"] == container["volumeMounts"]
