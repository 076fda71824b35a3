"""``--shard K/N``: a deterministic share of the selected cases, balanced by recorded durations.

Rules of this module (sans-IO: the split is a function of its arguments alone):
- The unit of a split is a **case ID** (every item of a parametrized case goes with it), so a
  case is in exactly one shard and the shards together are the selection.
- A case's cost is its recorded duration (:data:`DURATIONS`, ``conformance/durations.json``:
  seconds per case ID for each profile of the reference runner); a case the file does not know
  costs the mean of the selected cases it knows (pytest-split's rule), 1 s when it knows none.
- Cases that may share a kept world (the same world key, conformance/kept_worlds.py) travel
  together: a group is cut, in ID order, into runs of at most a tenth of a shard's fair share
  (:data:`CHUNKS_PER_SHARD`). A small group stays whole (its one world start-up serves it), the
  big group of plain cases spreads over every shard in small runs (inside a shard the run order
  puts a world's cases together again), and no run outweighs a long case, which is dealt first:
  a run parallelises over the shard's workers, a long case does not. A case that never shares
  a world, or is a long one, is a unit of its own.
- Units are dealt longest first (pytest-split's ``least_duration``: greedy LPT) to the shard
  with the least load so far; ties go by the unit's first case ID, then the lower shard index,
  so every machine of a CI matrix computes the same split from the same selection.
- :func:`fingerprint` of the whole selection is recorded by every shard, so ``merge`` can tell
  that the shards it joins are the parts of one selection and that none is missing.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .run_order import DEFAULT_COST as DEFAULT_COST  # the cost of an unknown case (re-exported)
from .run_order import cut_runs, with_mean

#: a world group is cut into runs of at most (fair share / this) seconds
CHUNKS_PER_SHARD = 10
DURATIONS = "durations.json"  # beside this module (the plugin reads it)
SHARD_RE = re.compile(r"(\d+)/(\d+)")


class ShardError(ValueError):
    """A bad ``--shard`` or durations file (one-line message)."""


@dataclass(frozen=True)
class Shard:
    index: int  # 1-based
    total: int

    def __str__(self) -> str:
        return f"{self.index}/{self.total}"


def parse(text: str) -> Shard:
    m = SHARD_RE.fullmatch(text.strip())
    if not m:
        raise ShardError(f"--shard must be K/N (e.g. 2/4), not {text!r}")
    k, n = int(m[1]), int(m[2])
    if not 1 <= k <= n:
        raise ShardError(f"--shard {text}: K must be between 1 and N")
    return Shard(k, n)


def fingerprint(case_ids: Iterable[str]) -> dict[str, Any]:
    """The count and sha256 of a set of case IDs (sorted, one a line)."""
    ids = sorted(set(case_ids))
    return {"count": len(ids), "sha256": hashlib.sha256("\n".join(ids).encode()).hexdigest()}


def costs(case_ids: Sequence[str], durations: Mapping[str, float]) -> dict[str, float]:
    return dict(zip(case_ids, with_mean([float(durations[c]) if c in durations else None
                                         for c in case_ids]), strict=True))


def units(cases: Mapping[str, str | None], cost: Mapping[str, float], total: int) -> list[list[str]]:
    """The cases cut into the units of the rules above (each unit's IDs sorted)."""
    cap = sum(cost.values()) / max(1, total) / CHUNKS_PER_SHARD
    out: list[list[str]] = []
    groups: dict[str, list[str]] = {}
    for cid in sorted(cases):
        key = cases[cid]
        if key is None:
            out.append([cid])
        else:
            groups.setdefault(key, []).append(cid)
    for key in sorted(groups):
        out += cut_runs(groups[key], cost.__getitem__, cap)
    return out


def split(cases: Mapping[str, str | None], durations: Mapping[str, float],
          total: int) -> list[list[str]]:
    """``cases`` (case ID -> world key, None: never shares) dealt into ``total`` shards; shard
    ``k`` (1-based) is element ``k - 1``, its IDs sorted."""
    cost = costs(sorted(cases), durations)
    loads = [0.0] * total
    shards: list[list[str]] = [[] for _ in range(total)]
    ranked = sorted(units(cases, cost, total), key=lambda u: (-sum(cost[c] for c in u), u[0]))
    for unit in ranked:
        i = min(range(total), key=lambda j: (loads[j], j))
        shards[i] += unit
        loads[i] += sum(cost[c] for c in unit)
    return [sorted(s) for s in shards]


# -- the durations file ----------------------------------------------------------------------

def read_durations(text: str, where: str) -> dict[str, dict[str, float]]:
    """``{"profiles": {PROFILE: {CASE_ID: seconds}}}`` as its profiles (ShardError when not)."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ShardError(f"durations {where}: not JSON (line {exc.lineno}: {exc.msg})") from None
    profiles = doc.get("profiles") if isinstance(doc, dict) else None
    if not isinstance(profiles, dict) or not all(
            isinstance(m, dict) and all(isinstance(v, int | float) for v in m.values())
            for m in profiles.values()):
        raise ShardError(f"durations {where}: expected {{\"profiles\": {{PROFILE: {{CASE_ID: "
                         "seconds}}}}")
    return {p: {c: float(v) for c, v in m.items()} for p, m in profiles.items()}


def for_profile(profiles: Mapping[str, Mapping[str, float]], profile: str) -> dict[str, float]:
    """The durations a split of ``profile`` uses: that profile's, then any other's for a case
    it does not have (``all`` knows every case)."""
    out: dict[str, float] = {}
    for name in sorted(profiles, key=lambda p: p == profile):  # the profile's own last: it wins
        out.update(profiles[name])
    return out


def refreshed(text: str | None, runs: Iterable[tuple[str, Mapping[str, float]]],
              note: str) -> str:
    """The durations file ``text`` (None: a new one) with the (profile, {case: seconds}) of
    ``runs`` replacing their profiles' maps; several runs of one profile give each case the mean
    of its durations in them (one run's figure swings with the machine's load, and with whether
    the case got a fresh or a kept world)."""
    profiles = read_durations(text, "file") if text else {}
    seen: dict[str, dict[str, list[float]]] = {}
    for profile, durations in runs:
        for c, secs in durations.items():
            seen.setdefault(profile, {}).setdefault(c, []).append(float(secs))
    for profile, by_case in seen.items():
        profiles[profile] = {c: round(sum(v) / len(v), 3) for c, v in sorted(by_case.items())}
    doc = {"about": note, "profiles": {p: profiles[p] for p in sorted(profiles)}}
    return json.dumps(doc, indent=1, sort_keys=False) + "\n"
