"""``World``: control plane + scripted Hermes + registered runner + secrets, against the
reference runner (a black box launched by command) and against a leaking one."""

from __future__ import annotations

import inspect
import json

from conformance.reference_cmd import REFERENCE_RUNNER_CMD
from conformance.secrets import REDACTED
from conformance.worlds import open_world
from fake_server import ControlPlane
from fixtures import ScriptedHermes

REF = REFERENCE_RUNNER_CMD


async def test_world_runs_the_reference_runner_and_redacts_its_transcript() -> None:
    async with open_world(REF) as world:
        assert world.runner is not None and world.runner.running
        runner_dir = world.runner.directory
        (world.artifact_root / "a.txt").write_text("artifact\n")
        out = await world.cp.command(world.runner_id, "http", {
            "path": "/api/files/download", "method": "GET",
            "search": f"?profile=default&path={world.artifact_root / 'a.txt'}"})
        assert out.ok, out
        token = world.registered.token
        assert token in world.secrets and world.config["token"] == token
        assert world.config["allowedProfiles"] == ["default"]
        assert world.config["artifactRoots"] == [str(world.artifact_root)]
        transcript = world.transcript()
        seqs = [item["seq"] for item in transcript]
        assert seqs == sorted(seqs) and {"exchange", "effect"} <= {i["type"] for i in transcript}
        assert not any(secret in json.dumps(transcript) for secret in world.secrets)
        assert world.scan_for_secrets() == []
        assert world.redact(f"x {token} y") == f"x {REDACTED} y"
        if "sequence" in inspect.signature(ControlPlane).parameters and \
                "sequence" in inspect.signature(ScriptedHermes).parameters:
            assert len(set(seqs)) == len(seqs)  # one counter for both logs
        epoch = world.cp.epoch(world.runner_id)
        new = await world.restart_runner()
        assert new is not None and new != epoch
    assert not runner_dir.exists() and not world.artifact_root.exists()


async def test_account_mode_puts_credentials_in_the_config_and_the_registry() -> None:
    async with open_world(None, hermes_auth="account", profiles=["default", "research"]) as w:
        creds = w.config["hermesCredentials"]
        assert creds["password"] == w.hermes.password and w.hermes.password in w.secrets
        assert w.config["allowedProfiles"] == ["default", "research"]
        assert [r["name"] for r in await w.admin.list_runners()] == ["runner-under-test"]


async def test_scan_finds_a_runner_that_prints_its_config() -> None:
    cmd = "sh -c 'cat \"$0\" >&2' {config}"
    async with open_world(cmd, start_runner=False) as world:
        assert world.runner is not None
        await world.runner.start()
        assert await world.runner.wait(20) == 0
        leaks = {str(leak) for leak in world.scan_for_secrets()}
    assert "runner token in runner stderr (run 1)" in leaks


async def test_clock_offset_follows_a_manual_clock() -> None:
    async with open_world(None, manual_clock=True) as world:
        assert world.clock is not None
        base = world.clock_offset()
        world.clock.advance(3600)
        assert round(world.clock_offset() - base) == 3600
