"""A Hypothesis story over the poll's real ledger path (real SQLite, fake admit and Hermes):
deliveries, concurrent duplicates, conflicting replays, crashes between `started` and
`complete`, restarts and the passing of hours. Promise: no command ever executes twice, a
completed receipt is replayed unchanged until it retires, and everything else is a precise
refusal."""
from __future__ import annotations

import asyncio
import shutil
import tempfile
from typing import Any

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from runner_ref import timings
from runner_ref.config import parse_config
from runner_ref.fingerprint import command_fingerprint
from runner_ref.ledger_store import LedgerStore
from runner_ref.poll_loop import PollLoop

CFG = parse_config({
    "protocol": 1, "serverURL": "http://127.0.0.1:9", "token": "t" * 40,
    "runnerId": "0b3c9a9e-2f51-4a8e-9a43-5e8f8e2f6b1c", "hermesURL": "http://127.0.0.1:9",
    "allowedProfiles": ["default"]})
HOUR = 3_600_000
IDS = st.sampled_from(["a", "b", "c", "d"])
VARIANTS = st.sampled_from(["p", "q"])


class AgentLedgerStory(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = tempfile.mkdtemp(prefix="poll-loop-story-")
        self.loop = asyncio.new_event_loop()
        self.now = 1_800_000_000_000
        self._real_now = timings.now_ms
        timings.now_ms = lambda: self.now
        self.executions: dict[str, int] = {}
        self.first: dict[str, tuple[str, Any]] = {}   # id → (variant, first reply)
        self.completed_at: dict[str, int] = {}
        self.crashed: set[str] = set()
        self.store = self.run(LedgerStore.open(f"{self.dir}/l.sqlite3"))
        self.poll = self.make_poll_loop()

    def run(self, coro: Any) -> Any:
        return self.loop.run_until_complete(coro)

    def make_poll_loop(self) -> PollLoop:
        poll = PollLoop(CFG, self.store, "inst")

        async def admit(route: str, body: dict[str, Any], epoch: str | None = None,
                        timeout: float | None = None) -> Any:
            return {"allowed": True}

        async def http(payload: dict[str, Any]) -> Any:
            cid = payload["cid"]
            self.executions[cid] = self.executions.get(cid, 0) + 1
            await asyncio.sleep(0)
            return {"ran": cid, "variant": payload["v"]}

        poll.machine.post = admit  # type: ignore[method-assign,assignment]
        poll.kinds["http"] = http
        poll.machine.epoch = "e"
        poll._connected = True
        return poll

    def command(self, cid: str, variant: str) -> dict[str, Any]:
        return {"id": cid, "kind": "http", "payload": {"cid": cid, "v": variant},
                "expiresAt": 1_800_000_000_000 + 100 * HOUR}

    def check(self, cid: str, variant: str, reply: dict[str, Any]) -> None:
        code = reply.get("error", {}).get("code")
        if cid in self.crashed:
            assert code in ("runner_command_uncertain", "idempotency_conflict"), reply
            return
        if cid not in self.first:
            assert reply == {"result": {"ran": cid, "variant": variant}}, reply
            self.first[cid] = (variant, reply)
            self.completed_at[cid] = self.now
            return
        first_variant, first_reply = self.first[cid]
        if variant != first_variant:
            assert code == "idempotency_conflict", reply
        elif self.now - self.completed_at[cid] > HOUR and code == "runner_command_uncertain":
            pass   # retired (at start-up or after 256 commands)
        else:
            assert reply == first_reply, reply

    @rule(cid=IDS, variant=VARIANTS)
    def deliver(self, cid: str, variant: str) -> None:
        self.check(cid, variant, self.run(self.poll.handle(self.command(cid, variant), "e")))

    @rule(cid=IDS, variant=VARIANTS)
    def deliver_twice_at_once(self, cid: str, variant: str) -> None:
        cmd = self.command(cid, variant)

        async def both() -> list[dict[str, Any]]:
            return list(await asyncio.gather(self.poll.handle(dict(cmd), "e"),
                                             self.poll.handle(dict(cmd), "e")))
        one, two = self.run(both())
        assert one == two
        self.check(cid, variant, one)

    @rule(cid=st.sampled_from(["x", "y"]), variant=VARIANTS)
    def killed_after_started(self, cid: str, variant: str) -> None:
        """kill -9 between `started` and `complete`: the row is started, nothing ran."""
        if cid in self.crashed:
            return
        self.run(self.store.claim(cid, command_fingerprint(self.command(cid, variant)),
                                  self.now))
        self.crashed.add(cid)

    @rule()
    def restart(self) -> None:
        self.run(self.poll._retire_now())   # what a new process does at start-up
        self.poll = self.make_poll_loop()

    @rule(minutes=st.integers(1, 150))
    def time_passes(self, minutes: int) -> None:
        self.now += minutes * 60_000

    @invariant()
    def never_twice(self) -> None:
        assert all(n <= 1 for n in self.executions.values()), self.executions

    @invariant()
    def crashed_never_ran(self) -> None:
        assert not any(self.executions.get(c) for c in self.crashed)

    def teardown(self) -> None:
        timings.now_ms = self._real_now
        try:
            self.run(self.poll.machine.close())
            self.run(self.poll.hermes.close())
            self.run(self.store.close())
        finally:
            self.loop.close()
            shutil.rmtree(self.dir, ignore_errors=True)


AgentLedgerStory.TestCase.settings = settings(stateful_step_count=25)
TestAgentLedgerStory = AgentLedgerStory.TestCase

