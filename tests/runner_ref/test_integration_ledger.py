"""The runner process against the real fake control plane (and a counting loopback Hermes):
connect, http, dedupe, conflict, kill -9 + restart, unknown kinds, disable, SIGTERM."""
from __future__ import annotations

import asyncio
import base64
import json
import os
import signal
from pathlib import Path

from .integration import delivered, replay, rig
from .stub_hermes import StubHermes


async def test_connect_http_and_dedupe(tmp_path: Path) -> None:
    async with StubHermes() as hermes, rig(tmp_path, hermes.url) as r:
        await r.runner.wait_output("connected")
        out = await r.cp.command(r.runner_id, "http", {"path": "/api/status", "method": "GET"},
                                 account="alice")
        assert out.ok, out
        assert out.result["status"] == 200
        assert json.loads(base64.b64decode(out.result["body"]))["version"] == "0.19.0"

        # the same command delivered twice in one batch: one Hermes effect, one receipt
        r.cp.faults.duplicate_deliveries(1, mode="batch")
        out = await r.cp.command(r.runner_id, "http", {"path": "/api/config", "method": "GET",
                                                       "search": "?profile=default&n=dup"},
                                 account="alice")
        assert out.ok and hermes.hits["/api/config?dup"] == 1

        # delivered again on the next poll after completing: answered from the ledger
        r.cp.faults.duplicate_deliveries(1, mode="next_poll")
        out = await r.cp.command(r.runner_id, "http", {"path": "/api/config", "method": "GET",
                                                       "search": "?profile=default&n=again"},
                                 account="alice")
        assert out.ok and hermes.hits["/api/config?again"] == 1
        wire = delivered(r.cp, "http")[-1]
        again = await replay(r.cp, r.runner_id, wire)
        second = await again
        assert second.ok and second.result == out.result
        assert hermes.hits["/api/config?again"] == 1

        record = await r.cp.get_runner(r.runner_id)
        assert record is not None and set(record.features) == {
            "execution-context-v1", "workspace-memory-bind-v1", "managed-browser-disabled-v1",
            "credential-ref-v1"}
        polls = [ex for ex in r.cp.history if ex.route == "poll"]
        assert polls[0].reset and not any(ex.reset for ex in polls[1:])
        assert {ex.instance for ex in r.cp.history} == {polls[0].instance}
        for ex in r.cp.history:
            if ex.route != "poll":
                assert ex.request_epoch == ex.epoch, ex   # every non-poll carries the epoch


async def test_conflict_unknown_and_refusals(tmp_path: Path) -> None:
    async with StubHermes() as hermes, rig(tmp_path, hermes.url) as r:
        out = await r.cp.command(r.runner_id, "http", {"path": "/api/config", "method": "GET",
                                                       "search": "profile=default&n=c"},
                                 account="alice")
        assert out.ok
        wire = delivered(r.cp, "http")[-1]
        other = dict(wire["payload"], search="profile=default&n=c2")
        conflict = await (await replay(r.cp, r.runner_id, wire, payload=other))
        assert (conflict.status, conflict.code) == (502, "idempotency_conflict")
        assert hermes.hits["/api/config?c"] == 1 and hermes.hits["/api/config?c2"] == 0

        unknown = await r.cp.command(r.runner_id, "shell.exec", {"cmd": "id"})
        assert (unknown.status, unknown.code) == (502, "runner_command_unknown")
        ext = await r.cp.command(r.runner_id, "browser.invoke", {})
        assert ext.code == "runner_feature_unavailable"
        forbidden = await r.cp.command(r.runner_id, "http", {"path": "/api/sessions",
                                                             "method": "DELETE"}, account="alice")
        assert forbidden.code == "runner_http_forbidden" and not hermes.hits.get("/api/sessions")
        art = await r.cp.command(r.runner_id, "http", {
            "path": "/api/files/download", "method": "GET",
            "search": "profile=default&path=/etc/passwd"}, account="alice")
        assert art.code == "runner_artifact_forbidden"


async def test_kill9_mid_command_then_uncertain(tmp_path: Path) -> None:
    async with StubHermes() as hermes, rig(tmp_path, hermes.url) as r:
        hermes.hold = True
        handle = await r.cp.submit(r.runner_id, "http", {
            "path": "/api/config", "method": "GET", "search": "profile=default&n=k"},
            account="alice", deadline=30)
        await asyncio.wait_for(hermes.arrived.wait(), 10)   # started + admitted + executing
        os.killpg(r.runner.pid, signal.SIGKILL)
        assert await r.runner.wait(5) == -signal.SIGKILL
        hermes.hold = False
        hermes.release()
        wire = delivered(r.cp, "http")[-1]
        await r.restart()
        first = await asyncio.wait_for(handle.wait(), 10)  # the new instance fences the old one
        assert first.code == "runner_offline"
        await r.cp.wait_online(r.runner_id, timeout=10)
        again = await (await replay(r.cp, r.runner_id, wire))
        assert (again.status, again.code) == (502, "runner_command_uncertain")
        assert hermes.hits["/api/config?k"] == 1   # never replayed


async def test_disable_exits_1(tmp_path: Path) -> None:
    async with StubHermes() as hermes, rig(tmp_path, hermes.url) as r:
        await r.cp.disable_runner(r.runner_id)
        assert await r.runner.wait(10) == 1
        assert "runner_unauthorized" in r.runner.stderr()


async def test_sigterm_stops_cleanly(tmp_path: Path) -> None:
    async with StubHermes() as hermes, rig(tmp_path, hermes.url) as r:
        await r.runner.wait_output("connected")
        r.runner.signal(signal.SIGTERM)
        assert await r.runner.wait(10) == 0
        assert "stopped" in r.runner.stderr()
        assert r.runner.output().count(b"\n") >= 2 and not r.runner.stdout_path.read_bytes()
