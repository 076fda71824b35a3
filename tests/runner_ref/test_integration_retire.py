"""The 1 h retirement, without waiting: restart the runner under ``faketime +2h`` and the
receipt of a completed command is retired → a redelivery is ``runner_command_uncertain``."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from .integration import delivered, replay, rig
from .stub_hermes import StubHermes

FAKETIME = shutil.which("faketime")


@pytest.mark.skipif(FAKETIME is None, reason="Debian faketime not installed")
async def test_receipts_retire_after_one_hour(tmp_path: Path) -> None:
    async with StubHermes() as hermes, rig(tmp_path, hermes.url) as r:
        out = await r.cp.command(r.runner_id, "http", {
            "path": "/api/config", "method": "GET", "search": "profile=default&n=old"},
            account="alice", deadline=3 * 3600)
        assert out.ok
        wire = delivered(r.cp, "http")[-1]
        # still fresh: answered from the ledger
        assert (await (await replay(r.cp, r.runner_id, wire))).result == out.result
        r.runner.signal(15)
        assert await r.runner.wait(10) == 0
        await r.restart(prefix=[str(FAKETIME), "-f", "+2h"],
                        env={"FAKETIME_DONT_FAKE_MONOTONIC": "1"})
        await r.cp.wait_online(r.runner_id, timeout=10)
        again = await (await replay(r.cp, r.runner_id, wire))
        assert again.code == "runner_command_uncertain"
        assert hermes.hits["/api/config?old"] == 1
