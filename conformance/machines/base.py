"""``WorldMachine``: the base of every family machine, and the rule mixins they share.

Rules:
- A machine class gets its :class:`~.rig.Rig` from :func:`~.run.run_machine` (class attribute
  ``rig``); each example begins on it (:meth:`Rig.begin`) and is judged at teardown: the history
  checker over that example's facts; a violation fails the example with its minimal witness
  (sequence numbers), the seed and the replay command — Hypothesis then shrinks and prints the
  steps as runnable code.
- Invariants run at teardown, not after each step: a check reads the whole example's logs, and
  once per example keeps the machines above 20 steps/s.
- Restarts are budgeted (``max_restarts`` per example) because one costs a runner start-up.
- Bundles carry ids: ``commands`` holds delivered command wires, ``channels`` open channels.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, multiple, precondition, rule

from ..checks import Violation
from ..checks.render import render
from . import actions
from .rig import Rig


class WorldMachine(RuleBasedStateMachine):
    rig: ClassVar[Rig]
    family: ClassVar[str] = ""
    replay_cmd: ClassVar[str] = ""
    seed: ClassVar[int | None] = None
    max_restarts: ClassVar[int] = 1

    commands = Bundle("commands")

    #: pinned stories (the upstream anchors, protocol-reference §8): name → the steps, called on
    #: a fresh machine and judged at its teardown like any example (see ``run.run_pins``)
    pins: ClassVar[dict[str, Callable[[Any], None]]] = {}

    def __init__(self) -> None:
        super().__init__()
        self.restarts = 0
        self.disabled = False
        self.rig.begin()

    @classmethod
    def prepare(cls, rig: Rig) -> None:
        """Once per machine run, after the world opened (accounts, sources …)."""

    def live(self) -> bool:
        """The runner was not disabled in this example (rules that need it online ask)."""
        return not self.disabled

    def call(self, fn: Any, *args: Any) -> Any:
        self.rig.stats.steps += 1
        return self.rig.call(fn, *args)

    def can_restart(self) -> bool:
        return self.restarts < self.max_restarts

    @rule(target=commands, name=st.sampled_from(["a.txt", "b.txt"]))
    def enqueue_http(self, name: str) -> dict[str, Any]:
        handle = self.call(lambda: actions.http(self.rig, name=name))
        return dict(handle.wire)

    @rule(wire=commands)
    def replay_same(self, wire: dict[str, Any]) -> None:
        self.call(lambda: actions.replay(self.rig, wire))

    def teardown(self) -> None:
        rig = self.rig
        rig.settle()
        found = rig.violations()
        if found:
            if not rig.stats.first_failing_example:
                rig.stats.first_failing_example = rig.stats.examples
                rig.stats.first_failure_seconds = round(rig.elapsed(), 3)
            raise ViolationFound(render(found[0], seed=self.seed, replay=self.replay_cmd),
                                 found[0])


class ViolationFound(AssertionError):
    """An example's teardown found a violation; it travels with the error Hypothesis reports, so
    the violation and the text quoted for it are always of the same example."""

    def __init__(self, message: str, violation: Violation) -> None:
        super().__init__(message)
        self.violation = violation


def violation_of(failure: BaseException | None) -> Violation | None:
    """The violation behind ``failure``: itself, its cause, or (Hypothesis groups a flaky or a
    multiple failure) the first of its sub-exceptions that carries one."""
    if failure is None:
        return None
    if isinstance(failure, ViolationFound):
        return failure.violation
    if isinstance(failure, BaseExceptionGroup):
        for sub in failure.exceptions:
            if (found := violation_of(sub)) is not None:
                return found
    return violation_of(failure.__cause__)


class Dedupe(WorldMachine):
    @rule(wire=WorldMachine.commands)
    def replay_other_payload(self, wire: dict[str, Any]) -> None:
        self.call(lambda: actions.replay(self.rig, wire, other=True))

    @rule(target=WorldMachine.commands, path=st.sampled_from(["/api/secret", "/api/sessions"]),
          method=st.sampled_from(["GET", "POST"]))
    def enqueue_refused(self, path: str, method: str) -> dict[str, Any]:
        """An http command the runner must refuse (outside the allowlist): its refusal is a
        reply like any other, stored and answered again from the ledger (INV-6)."""
        async def go() -> Any:
            w = self.rig.world
            h = await w.cp.submit(w.runner_id, "http", {"path": path, "method": method,
                                                        "search": "?profile=default"},
                                  command_id=actions.new_id())
            return await actions.settle_handle(self.rig, h) and h

        return dict(self.call(go).wire)

    @rule(target=WorldMachine.commands, mode=st.sampled_from(["batch", "next_poll"]))
    def deliver_twice(self, mode: str) -> dict[str, Any]:
        self.rig.world.cp.faults.duplicate_deliveries(1, mode=mode)

        async def go() -> Any:
            handle = await actions.http(self.rig)
            # a copy run beside the first delivery answers too, before the example is judged
            await actions.answers_land(self.rig, handle.id)
            return handle

        return dict(self.call(go).wire)


class Crashes(WorldMachine):
    @precondition(lambda self: self.can_restart())
    @rule(target=WorldMachine.commands,
          point=st.sampled_from([p for p in actions.POINTS if p != "during_hermes"]))
    def kill_at(self, point: str) -> dict[str, Any]:
        self.restarts += 1
        rig = self.rig

        async def story() -> dict[str, Any]:
            cid = actions.new_id()
            handle = await actions.reach(rig, "http", point, cid)
            await actions.kill(rig, point, cid)
            rig.world.cp.faults.clear()
            await actions.start(rig)
            return dict(handle.wire)

        return self.call(story)

    @precondition(lambda self: self.can_restart())
    @rule(target=WorldMachine.commands)
    def kill_started_and_completed(self) -> Any:
        """kill -9 while one command is started (its admit held) and another has its result
        accepted; after the restart both are replayed: the completed one answered from the
        ledger (INV-6), the started one runner_command_uncertain (INV-7). Returns both wires."""
        self.restarts += 1
        rig = self.rig

        async def story() -> Any:
            held = actions.new_id()
            h1 = await actions.reach(rig, "http", "after_started", held)
            h2 = await actions.http(rig, name="b.txt")
            await actions.kill(rig, "after_started", held)
            rig.world.cp.faults.clear()
            await actions.start(rig)
            await actions.replay(rig, h1.wire)
            await actions.replay(rig, h2.wire)
            return multiple(dict(h1.wire), dict(h2.wire))

        return self.call(story)

    @precondition(lambda self: self.can_restart())
    @rule()
    def restart_runner(self) -> None:
        self.restarts += 1
        self.call(lambda: actions.restart_runner(self.rig, crash=True))
