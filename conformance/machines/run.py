"""Run one family machine on one shared rig, with the chosen Hypothesis profile and seed.

``run_machine(cls, runner_cmd, seed=…)`` opens a :class:`~.rig.Rig` (one world for the whole
run), binds it to the machine class, runs Hypothesis' state-machine runner seeded with ``seed``
and returns the stats (examples, steps, restarts, seconds). A failure is re-raised as
:class:`MachineFailed` carrying the violation (its witness), the seed and the replay command;
Hypothesis has printed the shrunk steps as runnable code by then.
"""

from __future__ import annotations

from typing import Any

from hypothesis import seed as hyp_seed
from hypothesis.stateful import run_state_machine_as_test

from ..checks import Violation
from ..hypothesis_profiles import current, machine_settings
from .base import WorldMachine
from .rig import Rig


class MachineFailed(AssertionError):
    def __init__(self, message: str, violation: Violation | None, stats: dict[str, Any]) -> None:
        super().__init__(message)
        self.violation, self.stats = violation, stats


def run_machine(cls: type[WorldMachine], runner_cmd: str, *, seed: int = 0,
                replay: str = "") -> dict[str, Any]:
    options = dict(getattr(cls, "world_options", {}) or {})
    rig = Rig(runner_cmd, **options)
    bound = type(cls.__name__, (cls,), {"rig": rig, "seed": seed, "replay_cmd": replay})
    failure: BaseException | None = None
    with rig:
        try:
            # @seed on the machine class is how Hypothesis seeds a state-machine run
            run_state_machine_as_test(hyp_seed(seed)(bound), settings=machine_settings(seed))
        except BaseException as exc:  # noqa: BLE001 - re-raised below with the stats
            failure = exc
    stats = {"family": cls.family, "profile": current(), "seed": seed, **rig.stats.as_dict()}
    if failure is not None:
        steps = "\n".join(str(n) for n in getattr(failure, "__notes__", []))
        raise MachineFailed(f"{cls.family}: {failure}\nsteps (Hypothesis, shrunk):\n{steps}\n"
                            f"seed: {seed}\nreplay: {replay}", rig.last_violation, stats) from failure
    return stats
