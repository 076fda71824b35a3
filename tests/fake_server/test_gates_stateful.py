"""A Hypothesis state machine over the sans-IO gate sequence: the world is runner processes
polling and posting with fresh or stale headers; the hub is modelled by applying the returned
actions as ``hub.apply`` does. The invariants are the promises of §2.3-2.4."""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import replace

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
        self.n = 0
        self.ever_retired: set[str] = set()

    def _apply(self, actions: list[Action], instance: str) -> RunnerView:
        """The hub's side: what ``hub.apply`` does with each action, on our own copy."""
        v = self.view
        for action in actions:
            if action is Action.RESET:
                v = replace(v, online_instance=None, online_epoch=None)
            elif action is Action.REPLACE:
                assert v.online_instance is not None, "REPLACE with nobody online"
                v = replace(v, retired=frozenset(v.retired) | {v.online_instance},
                            online_instance=None, online_epoch=None)
            elif action is Action.ENSURE_ONLINE and v.online_instance is None:
                self.n += 1
                v = replace(v, online_instance=instance, online_epoch=f"hub:{self.n}")
        return v

    def _send(self, route: str, i: int, reset: bool, stale: bool, method: str | None = None) -> None:
        inst = self.instances[i]
        epoch = "stale:epoch" if stale else self.view.online_epoch
        ask = Ask(route=route, method=method or ("GET" if route == "poll" else "POST"),
                  origin=None, authorization=f"Bearer {TOKEN}", instance=inst, protocol="1",
                  epoch=epoch, reset=reset, features=None)
        before = self.view
        d = decide(ask, before)
        assert self.view == before and self.view is before, "decide changed its input"
        if d.refusal is None or d.gate == "9 method":
            after = self._apply(d.actions, inst)
            # the gates' own copy of the view agrees with the hub's (gate 8 only fills the
            # online fields the gates left empty)
            if d.view.online_instance is not None:
                assert d.view == after
            assert d.view.retired == after.retired
            self.ever_retired |= set(after.retired)
            if d.refusal is None:
                assert Action.ENSURE_ONLINE in d.actions
                assert after.online_instance == inst
                if route != "poll":
                    assert (before.online_instance, before.online_epoch) == (inst, epoch), \
                        "a non-poll was accepted off the current state"
                    assert after.online_epoch == before.online_epoch
            self.view = after
        else:
            assert d.actions == [], f"refused by {d.gate} yet asked for {d.actions}"

    @rule(i=st.integers(0, 5), reset=st.booleans())
    def poll(self, i: int, reset: bool) -> None:
        self._send("poll", i, reset, False)

    @rule(i=st.integers(0, 5))
    def poll_with_wrong_method(self, i: int) -> None:
        self._send("poll", i, False, False, method="POST")

    @rule(i=st.integers(0, 5), stale=st.booleans(), route=st.sampled_from(["admit", "result", "event"]))
    def post(self, i: int, stale: bool, route: str) -> None:
        self._send(route, i, False, stale)

    @rule()
    def watchdog(self) -> None:
        self.view = replace(self.view, online_instance=None, online_epoch=None)

    @invariant()
    def retired_bounded_and_never_online(self) -> None:
        assert len(self.view.retired) <= self.view.retired_limit
        assert self.view.online_instance not in self.ever_retired


TestGates = Gates.TestCase
TestGates.settings = settings(stateful_step_count=40)
