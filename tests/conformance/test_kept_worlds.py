"""Kept worlds (conformance/kept_worlds.py): which cases share, in what order, and each gate
that refuses to hand a world on — on stand-in worlds; then two real cases sharing one runner."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from conformance import kept_worlds as kw
from fixtures.hermes.pauses import Moment, PauseRegistry

REPO = Path(__file__).resolve().parents[2]


def test_which_options_share() -> None:
    assert kw.shares_world({})
    assert kw.shares_world({"hermes_script": "plain"})
    assert not kw.shares_world({"fresh": True})
    assert not kw.shares_world({"start_runner": False})
    assert not kw.shares_world({"manual_clock": True})
    assert kw.shares_world({"manual_clock": False})


def test_keys_separate_options_and_ignore_fresh() -> None:
    a = kw.world_key("cmd", "scripted", kw.KEEPABLE_WORLD, {})
    assert a == kw.world_key("cmd", "scripted", kw.KEEPABLE_WORLD, {"fresh": False})
    assert a != kw.world_key("cmd", "scripted", kw.KEEPABLE_WORLD, {"hermes_script": "plain"})
    assert a != kw.world_key("other", "scripted", kw.KEEPABLE_WORLD, {})


class _Faults:
    def __init__(self) -> None:
        self.armed: dict[str, list[Any]] = {}
        self.duplicates_batch = 0
        self.duplicates_next_poll = 0


def _world() -> Any:
    """A stand-in with just the parts the gates read, idle and untouched."""
    runner = SimpleNamespace(runs=[object()], running=True, clock_offset=0.0)
    store = SimpleNamespace(writes=3)
    history = SimpleNamespace(entries=[])
    cp = SimpleNamespace(
        store=store, history=history, faults=_Faults(), lifecycle=SimpleNamespace(),
        hub=SimpleNamespace(), timings=SimpleNamespace(poll_hold=2.0), limits=SimpleNamespace(),
        is_online=lambda rid: True, epoch=lambda rid: "e1", queued=lambda rid: [],
        channels=lambda rid: {}, leases=lambda rid: {})
    core = SimpleNamespace(pauses=PauseRegistry(), conns=set(), live={}, tasks=set())
    hermes = SimpleNamespace(core=core, bridge=SimpleNamespace(fail_bind=None),
                             ws=SimpleNamespace(), script=SimpleNamespace(),
                             effects=SimpleNamespace(), password=None)
    return SimpleNamespace(runner=runner, cp=cp, hermes=hermes, runner_id="r1")


def _held_at_a_pause(w: Any) -> None:
    """Hermes reached a pause point the case armed, and nobody released it."""
    w.hermes.core.pauses.add("before session.create").trigger(Moment("before", "session.create"))


DISTURBANCES = {
    "runner-running": lambda w: setattr(w.runner, "running", False),
    "same-process": lambda w: w.runner.runs.append(object()),
    "plain-clock": lambda w: setattr(w.runner, "clock_offset", 30.0),
    "online": lambda w: setattr(w.cp, "is_online", lambda rid: False),
    "no-queue": lambda w: setattr(w.cp, "queued", lambda rid: ["cmd"]),
    "no-channel": lambda w: setattr(w.cp, "channels", lambda rid: {"c": object()}),
    "no-lease": lambda w: setattr(w.cp, "leases", lambda rid: {"l": object()}),
    "calm": lambda w: w.cp.history.entries.append(SimpleNamespace(fault="drop", status=None)),
    "no-fault": lambda w: w.cp.faults.armed.setdefault("poll", []).append(SimpleNamespace(n=1)),
    "store-untouched": lambda w: setattr(w.cp.store, "writes", 4),
    "same-knobs": lambda w: setattr(w.hermes.bridge, "fail_bind", 500),
    "no-pause": _held_at_a_pause,
    "no-socket": lambda w: w.hermes.core.conns.add("ws1"),
    "no-turn": lambda w: w.hermes.core.live.update(s=SimpleNamespace(running=True)),
}


def test_an_untouched_idle_world_is_kept() -> None:
    w = _world()
    assert kw.refusal(w, kw.mark(w)) is None


def test_every_gate_has_a_disturbance_here() -> None:
    assert [name for name, _, _ in kw.GATES] == list(DISTURBANCES)


@pytest.mark.parametrize("gate", list(DISTURBANCES))
def test_each_gate_refuses_its_disturbance(gate: str) -> None:
    w = _world()
    begun = kw.mark(w)
    DISTURBANCES[gate](w)
    why = kw.refusal(w, begun)
    assert why is not None and why.startswith(gate + ":"), why


def test_an_epoch_change_keeps_the_world() -> None:
    """The next case reads the current epoch; a case that changed it hands on a world that is
    online again (the round trip before the gates saw it poll)."""
    w = _world()
    begun = kw.mark(w)
    w.cp.epoch = lambda rid: "e2"
    assert kw.refusal(w, begun) is None


async def test_a_pause_point_never_reached_is_disarmed_and_a_released_one_is_kept() -> None:
    w = _world()
    begun = kw.mark(w)
    pauses = w.hermes.core.pauses
    never = pauses.add("before prompt.submit")
    passed = pauses.add("after session.create")
    passed.trigger(Moment("after", "session.create"))
    passed.release()
    assert kw.refusal(w, begun) is None  # armed, or reached and released: nothing is held
    assert await kw._tidy(w) is None
    assert never.released and not never.reached_once
    assert pauses.check(Moment("before", "prompt.submit")) is None  # it can no longer hold
    assert kw.refusal(w, begun) is None
    held = pauses.add("before session.resume")
    held.trigger(Moment("before", "session.resume"))
    assert await kw._tidy(w) is None and not held.released  # a held one is left to the gate
    assert (kw.refusal(w, begun) or "").startswith("no-pause:")


def test_a_patched_method_counts_as_a_turned_knob() -> None:
    class Log:
        def record(self) -> None: ...

    w = _world()
    w.hermes.effects = Log()
    begun = kw.mark(w)
    w.hermes.effects.record = lambda: None
    assert (kw.refusal(w, begun) or "").startswith("same-knobs:")


def test_a_world_of_another_shape_is_never_kept() -> None:
    w = _world()
    begun = kw.mark(w)
    del w.cp.queued
    assert (kw.refusal(w, begun) or "").startswith("no-queue: AttributeError")


def _certify(tmp_path: Path, *extra: str) -> dict[str, Any]:
    out = tmp_path / "bundle"
    subprocess.run([sys.executable, "-m", "conformance", "certify", "--cases", "LIM-001,LIM-003",
                    "-j", "1", "--lanes", "1", "--no-progress", "--out", str(out), *extra],
                   cwd=REPO, check=True, capture_output=True, timeout=300)
    doc = json.loads((out / "results.json").read_text())
    return {c["id"]: c["data"] for c in doc["cases"]}


@pytest.mark.slow
def test_two_plain_cases_share_one_runner_unless_told_not_to(tmp_path: Path) -> None:
    data = _certify(tmp_path)
    assert data["LIM-001"]["world"] == "fresh" and data["LIM-001"]["world_after"] == "kept"
    assert data["LIM-003"]["world"] == "kept after LIM-001"
    fresh = _certify(tmp_path, "--fresh-worlds")
    assert {d["world"] for d in fresh.values()} == {"fresh"}


def _entry(key: str, log: list[str], *, rig: bool = False) -> kw.Kept:
    async def closer() -> None:
        log.append(f"closed {key}")

    return kw.Kept(object(), key, closer,
                   close_now=(lambda: log.append(f"closed {key} at once")) if rig else None)


async def test_the_pool_keeps_capacity_entries_least_recently_used_out_first() -> None:
    log: list[str] = []
    pool = kw.Pool(capacity=2)
    pool.keep(_entry("a", log))
    pool.keep(_entry("b", log))
    taken = pool.take("a")
    assert taken is not None and taken.key == "a"
    pool.keep(taken)             # a is now the most recently used
    pool.keep(_entry("c", log))  # over capacity: b goes, closed at the next await
    assert [k.key for k in pool.kept] == ["a", "c"] and log == []
    await pool.drain()
    assert log == ["closed b"]
    assert pool.take("b") is None
    await pool.close()
    assert sorted(log) == ["closed a", "closed b", "closed c"]


async def test_a_rig_and_worlds_share_one_pool_and_freezing_drops_the_worlds() -> None:
    """A synchronous machine run freezes the session's loop: the kept worlds are not handed on
    after it (closed at the next await); the kept rig (its own thread) stays."""
    log: list[str] = []
    pool = kw.Pool()
    pool.keep(_entry("world", log))
    pool.keep(_entry(kw.rig_key("cmd", {}), log, rig=True))
    assert kw.rig_key("cmd", {}) != kw.world_key("cmd", "scripted", kw.KEEPABLE_WORLD, {})
    pool.freeze()
    assert [k.key for k in pool.kept] == [kw.rig_key("cmd", {})]
    assert await pool.borrow("world") is None
    assert log == ["closed world"]
    pool.close_rigs()
    assert log == ["closed world", f"closed {kw.rig_key('cmd', {})} at once"] and not pool.kept


def test_a_rig_over_capacity_is_closed_at_once() -> None:
    log: list[str] = []
    pool = kw.Pool(capacity=1)
    pool.keep(_entry("r1", log, rig=True))
    pool.keep(_entry("r2", log, rig=True))
    assert log == ["closed r1 at once"] and [k.key for k in pool.kept] == ["r2"]
