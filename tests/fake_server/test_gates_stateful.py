"""A Hypothesis state machine over the sans-IO gate sequence: the world is runner processes
polling and posting with fresh or stale headers; the invariants are the promises of §2.3-2.4."""

from __future__ import annotations

import hashlib
import uuid

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from fake_server.gates import Action, Ask, RunnerView, decide

TOKEN = "t" * 43
HASH = hashlib.sha256(TOKEN.encode()).hexdigest()


class Gates(RuleBasedStateMachine):
    @initialize()
    def setup(self) -> None:
        self.view = RunnerView(exists=True, enabled=True, token_hash=HASH, retired_limit=4)
        self.instances = [str(uuid.UUID(int=i)) for i in range(6)]
        self.epochs: list[str] = []
        self.n = 0

    def _send(self, route: str, i: int, reset: bool, stale: bool) -> None:
        inst = self.instances[i]
        epoch = "stale:epoch" if stale else self.view.online_epoch
        ask = Ask(route=route, method="GET" if route == "poll" else "POST", has_origin=False,
                  authorization=f"Bearer {TOKEN}", instance=inst, protocol="1", epoch=epoch,
                  reset=reset, features=None)
        was_retired = inst in self.view.retired
        before = (self.view.online_instance, self.view.online_epoch)
        view = RunnerView(**{**self.view.__dict__})
        d = decide(ask, view)
        if d.refusal is None:
            assert Action.ENSURE_ONLINE in d.actions
            if view.online_instance is None:
                self.n += 1
                view.online_instance, view.online_epoch = inst, f"hub:{self.n}"
                self.epochs.append(view.online_epoch)
            self.view = view
            if route == "poll":
                assert not was_retired, "a retired instance came back online"
            else:
                assert before == (inst, epoch), "a non-poll was accepted off the current state"
        else:
            assert d.actions == []
            assert (self.view.online_instance, self.view.online_epoch) == before

    @rule(i=st.integers(0, 5), reset=st.booleans())
    def poll(self, i: int, reset: bool) -> None:
        self._send("poll", i, reset, False)

    @rule(i=st.integers(0, 5), stale=st.booleans(), route=st.sampled_from(["admit", "result", "event"]))
    def post(self, i: int, stale: bool, route: str) -> None:
        self._send(route, i, False, stale)

    @rule()
    def watchdog(self) -> None:
        self.view.online_instance = self.view.online_epoch = None

    @invariant()
    def epochs_never_reused(self) -> None:
        assert len(set(self.epochs)) == len(self.epochs)

    @invariant()
    def retired_bounded_and_never_online(self) -> None:
        assert len(self.view.retired) <= self.view.retired_limit
        assert self.view.online_instance not in self.view.retired


TestGates = Gates.TestCase
TestGates.settings = settings(max_examples=150, stateful_step_count=40, deadline=None)
