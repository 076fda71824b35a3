"""The poll loop as a process against the fake control plane: a failed poll (any code but
runner_unauthorized) disconnects locally, waits, and polls again with ``x-runner-reset: 1``; the
process never exits for it."""
from __future__ import annotations

from pathlib import Path

from .integration import rig
from .stub_hermes import StubHermes


async def test_poll_errors_reconnect_after_1s_with_reset(tmp_path: Path) -> None:
    # The runner's reconnect wait is the rig's fast one (FAST_ENV, 0.1 s): this test proves
    # order, not duration; the 1 s wait itself is test_poll_loop_poll.py's (see below).
    async with StubHermes() as hermes, rig(tmp_path, hermes.url) as r:
        cp = r.cp
        await r.runner.wait_output("connected")
        old_epoch = cp.epoch(r.runner_id)
        cp.faults.fail_next("poll", status=409, code="runner_instance_retired")
        cp.faults.fail_next("poll", status=503, code="service_updating")
        # a command ends the hanging poll, so the next two polls fail at once (the command
        # itself may fail "runner is disconnected" if the disconnect overtakes it: by design)
        await cp.command(r.runner_id, "http", {"path": "/api/status", "method": "GET"},
                         account="alice")
        await r.runner.wait_output("connected", count=2, timeout=20)
        polls = [ex for ex in cp.history if ex.route == "poll"]
        failed = [i for i, ex in enumerate(polls) if ex.fault == "fail"]
        assert len(failed) == 2 and failed[1] == failed[0] + 1
        for i in failed:
            after = polls[i + 1]
            assert after.reset, "a poll after an error carries x-runner-reset: 1"
            ended = polls[i].end_time
            assert ended is not None
            # order, not duration: the retry begins after the failed poll was answered (the
            # 1 s wait itself is test_poll_loop_poll.py's: a reconnect wait of RECONNECT_DELAY
            # after every failed poll and only then)
            assert after.seq > polls[i].seq and after.time >= ended
        assert not polls[failed[0]].reset   # before the error the runner was connected
        assert r.runner.proc is not None and r.runner.proc.returncode is None
        assert cp.epoch(r.runner_id) != old_epoch      # the reset poll forced a new epoch
        out = await cp.command(r.runner_id, "http", {"path": "/api/status", "method": "GET"},
                               account="alice")
        assert out.ok, out   # delivered by a poll after the reset poll
        later = [ex for ex in cp.history if ex.route == "poll"][failed[1] + 2:]
        assert later and not any(ex.reset for ex in later)   # connected again: no more resets
        assert "injected failure" in r.runner.stderr()     # the server's error text
