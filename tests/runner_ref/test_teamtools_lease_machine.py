"""LeaseManager as a Hypothesis state machine against a small model of §3 lease.* and §6.

Rules are what happens to a runner: leases created / bound / closed, channels closing, sessions
changing hands, the plugin failing, time passing. Invariants are the protocol's promises.
Real loopback listeners are started, so every step runs on a real event loop and real sockets.
"""
from __future__ import annotations

import asyncio
import json
import uuid
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from runner_ref.errors import CommandError
from runner_ref.teamtools.leases import (
    BIND_PATH,
    UNBIND_PATH,
    Lease,
    LeaseManager,
    State,
)
from runner_ref.teamtools.listener import ListenerTimings

pytestmark = pytest.mark.timeout(120)

TTL, RENEW = 1800.0, 300.0
TOMBSTONE_SECONDS = 60.0   # protocol values, written here for the model (not read from the code)
LEASE_IDS = [str(uuid.UUID(int=i + 1)) for i in range(5)]
RUNTIMES = {"rt-1": ("conn-1", "default"), "rt-2": ("conn-2", "default"),
            "rt-w": ("conn-2", "writer")}
CATALOG = [{"id": "yaoyao_workspace_create_member", "name": "create_member",
            "description": "", "inputSchema": {"type": "object"}}]


class Fakes:
    def __init__(self) -> None:
        self.now = 0.0
        self.owners: dict[str, tuple[str, str]] = dict(RUNTIMES)
        self.plugin_ok = True
        self.posts: list[tuple[str, dict[str, Any]]] = []

    def clock(self) -> float:
        return self.now

    def owner_of(self, runtime_id: str) -> tuple[str, str] | None:
        return self.owners.get(runtime_id)

    def stored_id(self, runtime_id: str) -> str | None:
        return f"stored-{runtime_id}"

    async def post_json(self, path: str, body: dict[str, Any]) -> tuple[int, Any]:
        self.posts.append((path, json.loads(json.dumps(body))))
        if path == BIND_PATH and not self.plugin_ok:
            return 503, None
        return 200, {"ok": True, "native_tools": True}

    async def relay(self, lease_id: str, tool_id: str, arguments: dict[str, Any],
                    call_id: str) -> Any:
        return {}


@dataclass
class Model:
    runtime: str
    conn: str
    profile: str
    bound: bool
    expires: float
    renew: float


class LeaseMachine(RuleBasedStateMachine):
    lease_ids = Bundle("lease_ids")

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.f = Fakes()
        self.manager = LeaseManager(relay=self.f.relay, plugin=self.f, sessions=self.f,
                                    clock=self.f.clock, ttl=TTL, renew_every=RENEW,
                                    auto_renew=False,
                                    listener_timings=ListenerTimings(shutdown=0.1))
        self.active: dict[str, Model] = {}
        self.tombstones: dict[str, float] = {}
        self.leases: list[Lease] = []  # every Lease object ever created

    def teardown(self) -> None:
        self.loop.run_until_complete(self.manager.dispose_all())
        self.loop.close()

    def run(self, coro: Any) -> Any:
        return self.loop.run_until_complete(coro)

    def outcome(self, coro: Any) -> str:
        try:
            self.run(coro)
        except CommandError as exc:
            return exc.code
        return "ok"

    def owned(self, runtime: str, profile: str) -> bool:
        owner = self.f.owners.get(runtime)
        return owner is not None and owner[1] == profile

    def model_dispose(self, lease_id: str) -> None:
        self.active.pop(lease_id, None)
        self.tombstones[lease_id] = self.f.now + TOMBSTONE_SECONDS

    # -- rules --------------------------------------------------------------------------------
    @initialize(target=lease_ids)
    def a_bound_lease(self) -> str:
        self.create(LEASE_IDS[0], "rt-1", "default")
        self.bind(LEASE_IDS[0], False)
        return LEASE_IDS[0]

    @rule(target=lease_ids, lease_id=st.sampled_from(LEASE_IDS),
          runtime=st.sampled_from(sorted(RUNTIMES)), profile=st.sampled_from(["default", "writer"]))
    def create_lease(self, lease_id: str, runtime: str, profile: str) -> str:
        self.create(lease_id, runtime, profile)
        return lease_id

    def create(self, lease_id: str, runtime: str, profile: str) -> None:
        payload = {"leaseId": lease_id, "profile": profile, "workId": "w",
                   "session": {"runtimeId": runtime, "storedId": None}, "catalog": CATALOG}
        got = self.outcome(self.manager.create(payload))
        tomb = self.tombstones.get(lease_id, -1.0) > self.f.now
        if tomb or lease_id in self.active:
            assert got == "runner_error"
        elif not self.owned(runtime, profile):
            assert got == "runner_session_forbidden"
        else:
            assert got == "ok"
            conn = self.f.owners[runtime][0]
            self.active[lease_id] = Model(runtime, conn, profile, False, self.f.now + TTL,
                                          self.f.now + RENEW)
            lease = self.manager.lease(lease_id)
            assert lease is not None
            self.leases.append(lease)

    @rule(lease_id=lease_ids, other=st.booleans())
    def bind_lease(self, lease_id: str, other: bool) -> None:
        self.bind(lease_id, other)

    def bind(self, lease_id: str, other: bool) -> None:
        m = self.active.get(lease_id)
        runtime = ("rt-2" if m.runtime == "rt-1" else "rt-1") if m and other else (
            m.runtime if m else "rt-1")
        got = self.outcome(self.manager.bind({"leaseId": lease_id,
                                              "session": {"runtimeId": runtime}}))
        if m is None:
            assert got == "runner_lease_expired"
        elif self.f.now >= m.expires:
            assert got == "runner_lease_expired"
            self.model_dispose(lease_id)
        elif runtime != m.runtime or not self.owned(runtime, m.profile):
            assert got == "runner_session_forbidden"
        elif not self.f.plugin_ok:
            assert got == "team_tools_bind_failed"
            m.expires = self.f.now + TTL  # the attempt extended the expiry it announced
        else:
            assert got == "ok"
            m.bound, m.expires, m.renew = True, self.f.now + TTL, self.f.now + RENEW

    @rule(lease_id=st.one_of(lease_ids, st.sampled_from(LEASE_IDS)))
    def close(self, lease_id: str) -> None:
        assert self.run(self.manager.close({"leaseId": lease_id})) == {"ok": True}
        self.model_dispose(lease_id)

    @rule(conn=st.sampled_from(["conn-1", "conn-2"]))
    def channel_closes(self, conn: str) -> None:
        self.run(self.manager.dispose_channel(conn))
        for lease_id in [k for k, m in self.active.items() if m.conn == conn]:
            self.model_dispose(lease_id)

    @rule()
    def epoch_changes(self) -> None:
        self.run(self.manager.dispose_all())
        for lease_id in list(self.active):
            self.model_dispose(lease_id)

    @rule(runtime=st.sampled_from(sorted(RUNTIMES)))
    def session_changes_hands(self, runtime: str) -> None:
        if runtime in self.f.owners:
            del self.f.owners[runtime]
        else:
            self.f.owners[runtime] = RUNTIMES[runtime]

    @rule()
    def plugin_toggles(self) -> None:
        self.f.plugin_ok = not self.f.plugin_ok

    @rule(seconds=st.sampled_from([1.0, 59.0, 60.0, 299.0, 300.0, 1800.0]))
    def time_passes(self, seconds: float) -> None:
        self.f.now += seconds
        self.run(self.manager.tick())
        for lease_id, m in list(self.active.items()):
            if self.f.now >= m.expires:
                self.model_dispose(lease_id)
            elif self.f.now >= m.renew:
                if not self.owned(m.runtime, m.profile) or (m.bound and not self.f.plugin_ok):
                    self.model_dispose(lease_id)
                else:
                    m.expires, m.renew = self.f.now + TTL, self.f.now + RENEW

    @precondition(lambda self: bool(self.active))
    @rule()
    def session_info(self) -> None:
        lease_id = sorted(self.active)[0]
        self.manager.on_session_info(self.active[lease_id].runtime, "stored-new")
        lease = self.manager.lease(lease_id)
        assert lease is not None and lease.stored_id == "stored-new"

    # -- invariants -----------------------------------------------------------------------------
    @invariant()
    def the_active_leases_are_the_models(self) -> None:
        assert {lease.lease_id for lease in self.manager.active()} == set(self.active)

    @invariant()
    def tombstones_match_and_no_active_lease_is_tombstoned(self) -> None:
        expected = {k for k, until in self.tombstones.items() if until > self.f.now}
        assert set(self.manager.tombstones()) == expected
        assert not expected & set(self.active)

    @invariant()
    def disposed_leases_are_closed_and_unbound(self) -> None:
        unbound = {b["generation"] for p, b in self.f.posts if p == UNBIND_PATH}
        for lease in self.leases:
            if lease.state is State.DISPOSED:
                assert lease.listener._runner is None  # listener closed
                if lease.bind_sent:
                    assert lease.generation in unbound
            else:
                assert lease.generation not in unbound

    @invariant()
    def every_bind_names_its_own_listener(self) -> None:
        for path, body in self.f.posts:
            if path == BIND_PATH:
                assert body["bridge_url"].startswith("http://127.0.0.1:")
                assert body["native_tools"] is True and body["workspace_memory"] is False


TestLeaseMachine = LeaseMachine.TestCase
TestLeaseMachine.settings = settings(stateful_step_count=30)
