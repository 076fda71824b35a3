"""Four shards of the core profile against the reference runner, merged, give exactly the
statuses and the verdict of one unsharded run with the same seed (issue 23's done-means). The
shards run one after another here, each on two workers, as four CI machines would run them at
once; their walls are printed, never asserted (bench figures: docs/certification.md §6)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conformance.results import validate

ROOT = Path(__file__).resolve().parents[2]
SEED = "2323"
SHARDS = 4


def certify(out: Path, *extra: str) -> tuple[int, float]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    argv = [sys.executable, "-m", "conformance", "certify", "--profile", "core", "--seed", SEED,
            "-j", "2", "--no-progress", "--out", str(out), *extra]
    began = time.monotonic()
    proc = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode != 2, proc.stderr[-3000:]
    return proc.returncode, time.monotonic() - began


def statuses(bundle: Path) -> dict[str, str]:
    doc = json.loads((bundle / "results.json").read_text())
    return {c["id"]: c["status"] for c in doc["cases"]}


def causes(bundle: Path, ids: set[str]) -> list[str]:
    doc = json.loads((bundle / "results.json").read_text())
    return [f"{c['id']} {c['status']}: {(c['actual'] or c['detail'])[:200]}"
            for c in doc["cases"] if c["id"] in ids]


@pytest.mark.slow  # one core run and its four shards, one after another
@pytest.mark.timeout(1800)  # five certify runs of core on two workers each (minutes under load)
def test_four_shards_of_core_merged_are_one_unsharded_run(tmp_path: Path) -> None:
    whole_code, whole_wall = certify(tmp_path / "whole")
    walls = []
    for k in range(1, SHARDS + 1):
        _, wall = certify(tmp_path / f"s{k}", "--shard", f"{k}/{SHARDS}")
        walls.append(wall)
    proc = subprocess.run(
        [sys.executable, "-m", "conformance", "merge",
         *(str(tmp_path / f"s{k}") for k in range(1, SHARDS + 1)), "--out", str(tmp_path / "m")],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True,
        timeout=300)
    print(f"whole {whole_wall:.1f} s; shards " + ", ".join(f"{w:.1f}" for w in walls)
          + f" s; a quarter of the whole {whole_wall / SHARDS:.1f} s")
    whole, merged = statuses(tmp_path / "whole"), statuses(tmp_path / "m")
    differ = {cid for cid in whole.keys() | merged.keys() if whole.get(cid) != merged.get(cid)}
    assert not differ, ("whole: " + "; ".join(causes(tmp_path / "whole", differ))
                        + " | merged: " + "; ".join(causes(tmp_path / "m", differ)))
    assert proc.returncode == whole_code, proc.stderr[-2000:]
    doc = json.loads((tmp_path / "m" / "results.json").read_text())
    validate(doc)
    whole_doc = json.loads((tmp_path / "whole" / "results.json").read_text())
    assert doc["summary"] == whole_doc["summary"]
