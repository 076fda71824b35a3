"""Run one family machine on one shared rig, with the chosen Hypothesis profile and seed.

``run_machine(cls, runner_cmd, seed=…)`` opens a :class:`~.rig.Rig` (one world for the whole
run), binds it to the machine class, runs Hypothesis' state-machine runner seeded with ``seed``
and returns the stats (examples, steps, restarts, seconds, and ``first_failing_example``: the
number of the first example the checker failed, 1 when a saved example replayed first).
``key`` (the case id) keys the run's examples in the example database in use
(:mod:`conformance.hypothesis_profiles`): a failure is saved under it, and the next run with
that key replays it before generating anything. A failure is re-raised as
:class:`MachineFailed` carrying the violation (its witness), the seed and the replay command;
Hypothesis has printed the shrunk steps as runnable code by then.
"""

from __future__ import annotations

import inspect
import re
from typing import Any

from hypothesis import seed as hyp_seed
from hypothesis.stateful import run_state_machine_as_test

from ..checks import Violation
from ..hypothesis_profiles import current, machine_settings
from ..kept_worlds import Pool
from . import kept
from .base import WorldMachine, violation_of


class MachineFailed(AssertionError):
    judged_by_cause = True  # conformance.judge: a harness timeout under it stays a timeout

    def __init__(self, message: str, violation: Violation | None, stats: dict[str, Any]) -> None:
        super().__init__(message)
        self.violation, self.stats = violation, stats


def run_machine(cls: type[WorldMachine], runner_cmd: str, *, seed: int = 0,
                replay: str = "", pins: bool = True, pool: Pool | None = None,
                key: str | None = None) -> dict[str, Any]:
    """``pool``: run on the rig this pool kept from an earlier run of the same runner command
    and world options (:mod:`.kept`; kept again if this run passes) instead of a fresh world
    (``None``: a rig of its own, closed after the run)."""
    options = dict(getattr(cls, "world_options", {}) or {})
    rig = kept.borrow(pool, runner_cmd, options)
    rig.new_run()
    bound = type(cls.__name__, (cls,), {"rig": rig, "seed": seed, "replay_cmd": replay})
    failure: BaseException | None = None
    steps = ""
    pinned = 0
    try:
        cls.prepare(rig)
        if pins:
            run_pins(bound)
        pinned = rig.stats.examples  # the pins' examples: not Hypothesis' (first_failing_example)
        # @seed on the machine class is how Hypothesis seeds a state-machine run
        run_state_machine_as_test(hyp_seed(seed)(bound), settings=machine_settings(seed, key))
    except PinFailed as exc:
        failure, steps = exc.__cause__ or exc, exc.steps
    except BaseException as exc:  # noqa: BLE001 - re-raised below with the stats
        failure = exc
        steps = "\n".join(str(n) for n in getattr(failure, "__notes__", []))
    finally:
        rig.lap()
        kept.give_back(pool, rig, passed=failure is None)
    stats = {"family": cls.family, "profile": current(), "seed": seed, **rig.stats.as_dict()}
    first = stats["first_failing_example"]
    stats["first_failing_example"] = first - pinned if first > pinned else 0
    if failure is not None:
        raise MachineFailed(f"{cls.family}: {failure}\nsteps (shrunk by Hypothesis, or the pin):\n"
                            f"{steps}\nseed: {seed}\nreplay: {replay}", violation_of(failure),
                            stats) from failure
    return stats


class PinFailed(AssertionError):
    judged_by_cause = True

    def __init__(self, name: str, steps: str) -> None:
        super().__init__(f"pinned story {name!r} failed")
        self.name, self.steps = name, steps


def run_pins(bound: type[WorldMachine]) -> int:
    """Each pinned story of the machine (``pins``) as one example: a fresh machine, the pin's
    steps, its teardown (the checker). Raises :class:`PinFailed` with the steps as code."""
    for name, pin in bound.pins.items():
        state = bound()
        failed: BaseException | None = None
        try:
            pin(state)
        except BaseException as exc:  # noqa: BLE001 - judged first: a violation explains it
            failed = exc
        try:
            state.teardown()  # the checker, also after a failed step (its facts are the story)
        except BaseException as exc:  # noqa: BLE001
            failed = exc
        if failed is not None:
            steps = f"# pin: {name}\nstate = {bound.__name__}()\n{_body(inspect.getsource(pin))}"
            raise PinFailed(name, steps + "\nstate.teardown()") from failed
    return len(bound.pins)


def _body(src: str) -> str:
    """The pin's body with ``s.`` as ``state.`` (runnable like Hypothesis' printed steps)."""
    lines = [ln.strip() for ln in src.splitlines()[1:] if ln.strip()]
    return "\n".join(re.sub(r"\bs\.", "state.", ln) for ln in lines)
