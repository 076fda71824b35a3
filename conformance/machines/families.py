"""The seven family machines (one ``RuleBasedStateMachine`` per family of the design brief).

Each adds to :class:`~.base.WorldMachine` the rules that are things happening in its family's
world; all are judged by the same history checker at teardown (``conformance.checks``).

| family | machine | rules beyond enqueue / replay |
|---|---|---|
| permission intersection | ``Permission`` | commands for each profile, change runner/account profiles |
| dedupe | ``Dedupe`` | replay with another payload, deliver twice (one batch / next poll) |
| incomplete receipts | ``Receipts`` | kill -9 at a named point, restart the runner |
| generations | ``Generations`` | restart the server, watchdog expiry, reset poll, disable |
| reconnection | ``Reconnection`` | drop / 5xx / delay the next answer of poll, admit, result |
| cancel races | ``CancelRaces`` | open, close overtaking open, interrupt overtaking a prompt, revoke |
| session isolation | ``Isolation`` | channels with sessions, RPC on a foreign session, revoke one |
"""

from __future__ import annotations

import asyncio
from typing import Any, ClassVar

from hypothesis import strategies as st
from hypothesis.stateful import Bundle, precondition, rule

from . import actions
from .base import Crashes, Dedupe, WorldMachine

PROFILES = ("default", "research")


class Permission(WorldMachine):
    family: ClassVar[str] = "permission intersection"
    world_options: ClassVar[dict[str, Any]] = {"profiles": PROFILES}

    @rule(profile=st.sampled_from([*PROFILES, "other"]))
    def enqueue_for_profile(self, profile: str) -> None:
        rig = self.rig

        async def go() -> None:
            w = rig.world
            payload = actions.http_payload(rig)
            payload["search"] = payload["search"].replace("profile=default", f"profile={profile}")
            h = await w.cp.submit(w.runner_id, "http", payload, command_id=actions.new_id())
            await h.wait(actions.WAIT)

        self.call(go)

    @rule(allowed=st.sets(st.sampled_from(PROFILES), min_size=1))
    def change_runner_profiles(self, allowed: set[str]) -> None:
        w = self.rig.world
        self.call(lambda: w.cp.set_runner_profiles(w.runner_id, sorted(allowed)))


class Receipts(Crashes):
    family: ClassVar[str] = "incomplete receipts"


class DedupeMachine(Dedupe):
    family: ClassVar[str] = "dedupe"


class Generations(WorldMachine):
    family: ClassVar[str] = "generations"

    @precondition(lambda self: self.can_restart())
    @rule()
    def restart_server(self) -> None:
        self.restarts += 1
        self.call(lambda: actions.restart_server(self.rig))

    @precondition(lambda self: self.can_restart())
    @rule()
    def watchdog_expiry(self) -> None:
        self.restarts += 1  # an epoch change costs the runner's 1 s reconnect pause
        w = self.rig.world
        self.call(lambda: actions.new_epoch(self.rig, lambda: w.cp.force_watchdog(w.runner_id)))

    @precondition(lambda self: self.can_restart())
    @rule()
    def reset_poll(self) -> None:
        self.restarts += 1
        w = self.rig.world

        async def fail_poll() -> None:
            w.cp.faults.fail_next("poll", status=503)
            await w.cp.submit(w.runner_id, "http", actions.http_payload(self.rig))

        self.call(lambda: actions.new_epoch(self.rig, fail_poll))


class Reconnection(WorldMachine):
    family: ClassVar[str] = "reconnection"

    @rule(target=WorldMachine.commands, route=st.sampled_from(["admit", "result"]),
          fault=st.sampled_from(["drop", "5xx", "slow"]))
    def fault_next_answer(self, route: str, fault: str) -> dict[str, Any]:
        return self._fault(route, fault)

    @precondition(lambda self: self.can_restart())
    @rule(target=WorldMachine.commands, fault=st.sampled_from(["drop", "5xx", "slow"]))
    def fault_next_poll(self, fault: str) -> dict[str, Any]:
        self.restarts += 1  # a poll error costs the runner's 1 s reconnect pause
        return self._fault("poll", fault)

    def _fault(self, route: str, fault: str) -> dict[str, Any]:
        rig = self.rig

        async def go() -> dict[str, Any]:
            w = rig.world
            cid = actions.new_id()
            target = None if route == "poll" else cid
            if fault == "drop":
                w.cp.faults.drop_next(route, target=target)
            elif fault == "5xx":
                w.cp.faults.fail_next(route, status=503, target=target)
            else:
                w.cp.faults.delay_next(route, seconds=1.0, target=target)
            h = await actions.http(rig, command_id=cid, wait=False)
            await actions.settle_handle(rig, h)
            return dict(h.wire)

        return self.call(go)


class CancelRaces(WorldMachine):
    family: ClassVar[str] = "cancel races"
    channels = Bundle("channels")

    @rule(target=channels)
    def open_channel(self) -> Any:
        return self.call(lambda: actions.channel(self.rig))

    @rule()
    def close_overtakes_open(self) -> None:
        w = self.rig.world

        async def go() -> None:
            ch, handle = await w.cp.submit_open_channel(w.runner_id)
            await actions.bounded(w.cp.close_channel(ch))
            await asyncio.wait_for(asyncio.shield(handle.future), actions.WAIT)

        self.call(go)

    @rule(ch=channels)
    def interrupt_overtakes_prompt(self, ch: Any) -> None:
        w = self.rig.world

        async def go() -> None:
            if ch.closed.is_set():
                return
            sid = await actions.session(self.rig, ch)
            if sid is None:
                return
            p = await w.cp.submit_rpc(ch, "prompt.submit", {"session_id": sid, "text": "HANGTEST"})
            await actions.bounded(w.cp.rpc(ch, "session.interrupt", {"session_id": sid}))
            await p.wait(actions.WAIT)

        self.call(go)

    @rule(ch=channels)
    def close(self, ch: Any) -> None:
        if not ch.closed.is_set():
            self.call(lambda: actions.bounded(self.rig.world.cp.close_channel(ch)))

    @rule(ch=channels)
    def revoke(self, ch: Any) -> None:
        self.rig.portal.call_sync(self.rig.world.cp.revoke_channel, ch)


class Isolation(WorldMachine):
    family: ClassVar[str] = "session isolation"
    sessions = Bundle("sessions")

    @rule(target=sessions)
    def channel_with_session(self) -> Any:
        async def go() -> Any:
            ch = await actions.channel(self.rig)
            return ch, await actions.session(self.rig, ch)

        return self.call(go)

    @rule(a=sessions, b=sessions)
    def prompt_on(self, a: Any, b: Any) -> None:
        """Prompt on channel ``a`` for the session of ``b`` (a foreign one unless a is b)."""
        (ch, _), (_, sid) = a, b
        w = self.rig.world

        async def go() -> None:
            if ch.closed.is_set() or sid is None:
                return
            await actions.bounded(w.cp.rpc(ch, "prompt.submit", {"session_id": sid, "text": "hi"}))

        self.call(go)

    @rule(a=sessions)
    def revoke_one(self, a: Any) -> None:
        self.rig.portal.call_sync(self.rig.world.cp.revoke_channel, a[0])


#: family prefix (catalogue) → machine
MACHINES: dict[str, type[WorldMachine]] = {
    "permission": Permission,
    "dedupe": DedupeMachine,
    "receipts": Receipts,
    "generations": Generations,
    "reconnection": Reconnection,
    "cancel": CancelRaces,
    "isolation": Isolation,
}
