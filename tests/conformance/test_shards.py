"""``--shard K/N``'s split (conformance/shards.py): a partition of the selection, the same on
every machine, balanced by the recorded durations, world groups kept in runs; the shipped
durations file; the refusals of a bad ``--shard``."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from conformance import shards
from conformance.catalogue import CATALOGUE, PROFILES
from conformance.shards import ShardError, split


def sample(n: int = 60, seed: int = 1) -> tuple[dict[str, str | None], dict[str, float]]:
    rnd = random.Random(seed)
    keys: dict[str, str | None] = {}
    durations: dict[str, float] = {}
    for i in range(n):
        cid = f"GEN-{i:03d}"
        keys[cid] = rnd.choice([None, "plain", "plain", "plain", "team"]) if i % 9 else None
        durations[cid] = round(rnd.uniform(0.1, 2.0), 3) if i % 9 else 6.0  # a few long ones,
        # which never share a world (the plugin gives a @long_case no world key)
    return keys, durations


@pytest.mark.parametrize("total", [1, 2, 3, 4, 7])
def test_the_shards_partition_the_selection(total: int) -> None:
    keys, durations = sample()
    parts = split(keys, durations, total)
    assert len(parts) == total
    flat = [c for part in parts for c in part]
    assert sorted(flat) == sorted(keys) and len(flat) == len(set(flat))


def test_the_split_is_a_function_of_the_selection_alone() -> None:
    keys, durations = sample()
    shuffled = dict(random.Random(5).sample(sorted(keys.items()), len(keys)))
    assert split(shuffled, dict(reversed(durations.items())), 4) == split(keys, durations, 4)


def test_equal_costs_are_dealt_by_case_id() -> None:
    keys: dict[str, str | None] = {f"DED-00{i}": None for i in range(1, 9)}
    assert split(keys, {}, 4) == [["DED-001", "DED-005"], ["DED-002", "DED-006"],
                                  ["DED-003", "DED-007"], ["DED-004", "DED-008"]]


def test_long_cases_are_spread_first_and_the_loads_balanced() -> None:
    keys, durations = sample(120)
    parts = split(keys, durations, 4)
    loads = [sum(durations[c] for c in p) for p in parts]
    longs = [sum(durations[c] == 6.0 for c in p) for p in parts]
    assert max(longs) - min(longs) <= 1
    assert max(loads) - min(loads) <= max(durations.values())


def test_a_world_group_travels_in_runs() -> None:
    keys: dict[str, str | None] = {f"GEN-{i:03d}": "plain" for i in range(100)}
    keys |= {f"TT-{i:03d}": "team" for i in range(4)}
    parts = split(keys, {c: 1.0 for c in keys}, 2)
    # the plain group is cut into runs of a tenth of a fair share (5.2 s): whole runs of 5
    run = int(len(keys) / 2 / shards.CHUNKS_PER_SHARD)
    for part in parts:
        nums = [int(c[4:]) for c in part if c.startswith("GEN")]
        assert len(nums) % run == 0
        chunks = [nums[i:i + run] for i in range(0, len(nums), run)]
        assert all(r == list(range(r[0], r[0] + run)) for r in chunks)
    # the small team group stays in one shard: one world start-up serves it
    assert sum(any(c.startswith("TT") for c in part) for part in parts) == 1


def test_long_cases_go_to_different_shards_before_any_run() -> None:
    keys: dict[str, str | None] = {f"GEN-{i:03d}": "plain" for i in range(160)}
    keys |= {"FLT-001": None, "FLT-002": None, "PROP-003": None, "PROP-004": None}
    durations = {c: 1.0 for c in keys} | {"FLT-001": 22.0, "FLT-002": 23.0, "PROP-003": 13.0,
                                            "PROP-004": 16.0}
    parts = split(keys, durations, 4)
    assert sorted(sum(c in ("FLT-001", "FLT-002", "PROP-003", "PROP-004") for c in p)
                  for p in parts) == [1, 1, 1, 1]


def test_an_unknown_case_costs_the_mean_of_the_known() -> None:
    assert shards.costs(["A", "B", "C"], {"A": 1.0, "B": 3.0}) == {"A": 1.0, "B": 3.0, "C": 2.0}
    assert shards.costs(["A"], {}) == {"A": shards.DEFAULT_COST}


@pytest.mark.parametrize("text, why", [("2", "K/N"), ("0/4", "between 1 and N"),
                                       ("5/4", "between 1 and N"), ("a/b", "K/N")])
def test_a_bad_shard_is_refused(text: str, why: str) -> None:
    with pytest.raises(ShardError, match=why):
        shards.parse(text)


def test_the_shipped_durations_know_every_case_of_every_profile() -> None:
    shipped = Path(shards.__file__).with_name(shards.DURATIONS)
    profiles = shards.read_durations(shipped.read_text(encoding="utf-8"), shards.DURATIONS)
    assert set(profiles) == set(PROFILES)
    for name in PROFILES:
        ids = {row.id for row in CATALOGUE.in_profile(name)}
        assert ids <= set(shards.for_profile(profiles, name)), name


def test_several_runs_of_a_profile_give_the_mean() -> None:
    text = shards.refreshed(None, [("core", {"A": 1.0, "B": 2.0}), ("core", {"A": 3.0})], "x")
    assert json.loads(text)["profiles"] == {"core": {"A": 2.0, "B": 2.0}}


def test_refreshing_replaces_one_profile() -> None:
    text = shards.refreshed(None, [("core", {"GEN-001": 1.23456}), ("all", {"GEN-001": 2.0})], "x")
    again = shards.refreshed(text, [("core", {"GEN-002": 0.5})], "x")
    assert json.loads(again)["profiles"] == {"all": {"GEN-001": 2.0}, "core": {"GEN-002": 0.5}}
    assert shards.for_profile(shards.read_durations(again, "f"), "core") == {
        "GEN-001": 2.0, "GEN-002": 0.5}


@pytest.mark.parametrize("text", ["[]", '{"profiles": {"core": {"GEN-001": "x"}}}', "{"])
def test_a_bad_durations_file_is_one_line(text: str) -> None:
    with pytest.raises(ShardError, match="durations f"):
        shards.read_durations(text, "f")
