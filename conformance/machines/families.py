"""The seven family machines (one ``RuleBasedStateMachine`` per family of the design brief).

Each adds to :class:`~.base.WorldMachine` the rules that are things happening in its family's
world; all are judged by the same history checker at teardown (``conformance.checks``).

| family | machine | rules beyond enqueue / replay |
|---|---|---|
| permission intersection | ``Permission`` | commands per profile and account, change runner / account / source profiles, revoke the account's authorization (also while an admit is pending) |
| dedupe | ``Dedupe`` | replay with another payload, deliver twice (one batch / next poll) |
| incomplete receipts | ``Receipts`` | kill -9 at a named point, restart the runner |
| generations | ``Generations`` | restart the server, watchdog expiry, reset poll, a channel across an epoch, disable |
| reconnection | ``Reconnection`` | drop / 5xx / delay the next answer of poll, admit, result |
| cancel races | ``CancelRaces`` | open, close overtaking open / an admit / a create, interrupt overtaking a prompt, revoke, lease.create / bind / close, revoke a lease, late open / create of a closed id |
| session isolation | ``Isolation`` | channels with sessions, RPC on a foreign session, revoke one |
"""

from __future__ import annotations

import asyncio
from typing import Any, ClassVar

from hypothesis import strategies as st
from hypothesis.stateful import Bundle, precondition, rule

from . import actions, races
from .base import Crashes, Dedupe, WorldMachine
from .pins import PINS
from .rig import within

PROFILES = ("default", "research")


class Permission(WorldMachine):
    family: ClassVar[str] = "permission intersection"
    world_options: ClassVar[dict[str, Any]] = {"profiles": PROFILES}

    @classmethod
    def prepare(cls, rig: Any) -> None:
        if races.ACCOUNT in rig.accounts:  # a kept rig (machines.kept): made by an earlier run
            return
        rig.call(lambda: rig.world.cp.create_account(races.ACCOUNT, PROFILES))
        rig.accounts.append(races.ACCOUNT)

    @rule(profile=st.sampled_from([*PROFILES, "other"]),
          account=st.sampled_from([None, races.ACCOUNT]))
    def enqueue_for_profile(self, profile: str, account: str | None) -> None:
        self.call(lambda: races.http_for(self.rig, profile, account))

    @rule(allowed=st.sets(st.sampled_from(PROFILES), min_size=1))
    def change_runner_profiles(self, allowed: set[str]) -> None:
        w = self.rig.world
        self.call(lambda: w.cp.set_runner_profiles(w.runner_id, sorted(allowed)))

    @rule(allowed=st.sets(st.sampled_from(PROFILES), min_size=1))
    def change_account_profiles(self, allowed: set[str]) -> None:
        self.call(lambda: self.rig.world.cp.set_account_profiles(races.ACCOUNT, sorted(allowed)))

    @rule(allowed=st.sets(st.sampled_from(PROFILES), min_size=1))
    def change_source_profiles(self, allowed: set[str]) -> None:
        self.call(lambda: races.set_source_profiles(self.rig, sorted(allowed)))

    @rule()
    def revoke_account_authorization(self) -> None:
        self.call(lambda: self.rig.world.cp.bump_authorization(races.ACCOUNT))

    @rule()
    def revoke_while_admit_pending(self) -> None:
        self.call(lambda: races.revoke_while_admit_pending(self.rig))


class Receipts(Crashes):
    family: ClassVar[str] = "incomplete receipts"

    @precondition(lambda self: self.can_restart())
    @rule(target=WorldMachine.commands)
    def retire_and_replay(self) -> dict[str, Any]:
        """A receipt aged one hour (server clock + the runner under faketime) is retired: its
        replay is answered runner_command_uncertain, never run again (INV-1 / INV-7)."""
        self.restarts += 1
        handle, _out = self.call(lambda: actions.retire(self.rig))
        return dict(handle.wire)


class DedupeMachine(Dedupe):
    family: ClassVar[str] = "dedupe"


class Generations(WorldMachine):
    family: ClassVar[str] = "generations"

    @precondition(lambda self: self.live() and self.can_restart())
    @rule()
    def restart_server(self) -> None:
        self.restarts += 1
        self.call(lambda: actions.restart_server(self.rig))

    @precondition(lambda self: self.live() and self.can_restart())
    @rule()
    def watchdog_expiry(self) -> None:
        self.restarts += 1  # an epoch change costs the runner's 1 s reconnect pause
        w = self.rig.world
        self.call(lambda: actions.new_epoch(self.rig, lambda: w.cp.force_watchdog(w.runner_id)))

    @precondition(lambda self: self.live() and self.can_restart())
    @rule()
    def reset_poll(self) -> None:
        self.restarts += 1
        w = self.rig.world

        async def fail_poll() -> None:
            w.cp.faults.fail_next("poll", status=503)
            await w.cp.submit(w.runner_id, "http", actions.http_payload(self.rig))

        self.call(lambda: actions.new_epoch(self.rig, fail_poll))

    @precondition(lambda self: self.live() and self.can_restart())
    @rule(what=st.sampled_from(["channel", "lease", "both"]))
    def across_epoch(self, what: str) -> None:
        """A channel (and a bound lease on its session) across one new epoch."""
        self.restarts += 1
        self.call(lambda: races.across_epoch(self.rig, channel=what != "lease",
                                             lease=what != "channel"))

    @precondition(lambda self: self.live() and self.can_restart())
    @rule()
    def disable_runner(self) -> None:
        """Upstream #16: after disable nothing more runs (commands refused runner_offline); the
        next example registers a fresh runner."""
        self.restarts += 1
        self.disabled = True
        w = self.rig.world
        self.call(lambda: w.cp.disable_runner(w.runner_id))


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
    leases = Bundle("leases")

    @rule(target=channels)
    def open_channel(self) -> Any:
        return self.call(lambda: actions.channel(self.rig))

    @rule()
    def close_overtakes_open(self) -> None:
        w = self.rig.world

        async def go() -> None:
            ch, handle = await w.cp.submit_open_channel(w.runner_id)
            await actions.bounded(w.cp.close_channel(ch))
            await within(f"the outcome of the overtaken open {ch.connection_id}",
                         asyncio.shield(handle.future))

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
            await within(f"the outcome of the interrupted prompt on {sid}", p.wait(actions.WAIT + 1))

        self.call(go)

    @rule(ch=channels)
    def close(self, ch: Any) -> None:
        if not ch.closed.is_set():
            self.call(lambda: actions.bounded(self.rig.world.cp.close_channel(ch)))

    @rule(ch=channels)
    def revoke(self, ch: Any) -> None:
        self.rig.portal.call_sync(self.rig.world.cp.revoke_channel, ch)

    @rule(ch=channels)
    def close_overtakes_admit(self, ch: Any) -> None:
        self.call(lambda: races.close_overtakes_admit(self.rig, ch))

    @rule(ch=channels)
    def reopen_closed_channel(self, ch: Any) -> None:
        self.call(lambda: races.reopen_closed_channel(self.rig, ch))

    @rule(target=leases, ch=channels)
    def create_lease(self, ch: Any) -> Any:
        return self.call(lambda: races.lease_on(self.rig, ch))

    @rule(ch=channels)
    def close_overtakes_create(self, ch: Any) -> None:
        self.call(lambda: races.close_overtakes_create(self.rig, ch))

    @rule(lease=leases)
    def bind_lease(self, lease: Any) -> None:
        if lease is not None:
            self.call(lambda: actions.bounded(self.rig.world.cp.bind_lease(lease)))

    @rule(lease=leases)
    def close_lease(self, lease: Any) -> None:
        if lease is not None and lease.active:
            self.call(lambda: actions.bounded(self.rig.world.cp.close_lease(lease)))

    @rule(lease=leases)
    def revoke_lease(self, lease: Any) -> None:
        if lease is not None:
            self.rig.portal.call_sync(self.rig.world.cp.revoke_lease, lease)

    @rule(lease=leases)
    def recreate_closed_lease(self, lease: Any) -> None:
        if lease is not None and lease.active:
            self.call(lambda: races.recreate_closed_lease(self.rig, lease))


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


for _key, _cls in {"permission": Permission, "dedupe": DedupeMachine, "receipts": Receipts,
                   "generations": Generations, "reconnection": Reconnection,
                   "cancel": CancelRaces, "isolation": Isolation}.items():
    _cls.pins = PINS[_key]

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
