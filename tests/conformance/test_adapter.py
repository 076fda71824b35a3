"""The process helper and the runner adapter, over real child processes (no condition sleeps:
every wait is a line, an exit or an event)."""

from __future__ import annotations

import asyncio
import hashlib
import json
import shlex
import signal
import stat
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from conformance.adapter import (
    AdapterError,
    RunnerExited,
    RunnerStartError,
    RunnerUnderTest,
    TemplateError,
    split_template,
)
from conformance.process import (
    Process,
    ProcessExited,
    StartError,
    faketime_env,
    faketime_installed,
    live_group_members,
    scrubbed_env,
)
from conformance.secrets import REDACTED

PY = sys.executable
TOKEN = "tok_" + "Adapt3r" * 6
PASSWORD = "pw-" + "Hx7" * 6

# prints, then waits for SIGUSR1 to print again; ignores SIGTERM; forks a grandchild that
# inherits the pipes, ignores SIGTERM and SIGUSR1 too, and sleeps
STUBBORN = r"""
import os, signal, subprocess, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
signal.signal(signal.SIGUSR1, signal.SIG_IGN)  # ignored signals stay ignored across exec
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
signal.signal(signal.SIGUSR1, lambda *a: print("second", flush=True))
print(f"grandchild {child.pid}", flush=True)
print("to stderr", file=sys.stderr, flush=True)
while True:
    signal.pause()
"""

GRACEFUL = r"""
import signal, sys
signal.signal(signal.SIGTERM, lambda *a: (print("stopped", file=sys.stderr, flush=True), sys.exit(0)))
print("ready", file=sys.stderr, flush=True)
while True:
    signal.pause()
"""


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


# -- process.py --------------------------------------------------------------------------------


async def test_lines_are_awaited_and_the_stubborn_group_is_reaped() -> None:
    proc = await Process([PY, "-c", STUBBORN]).start()
    try:
        line = await proc.wait_line("grandchild", 20, stream="stdout")
        grandchild = int(line.split()[1])
        await proc.wait_line("to stderr", 10)
        proc.signal(signal.SIGUSR1)
        assert await proc.wait_line("second", 10, stream="stdout") == "second"
        assert alive(grandchild) and proc.pid in live_group_members(proc.pid)
        code = await proc.stop(timeout=0.5)  # SIGTERM is ignored → SIGKILL
    finally:
        await proc.reap()
    assert code == -signal.SIGKILL
    assert not alive(grandchild)
    assert live_group_members(proc.pid) == []
    assert b"to stderr" in proc.output() and proc.lines("stdout")[0].startswith("grandchild")


async def test_sigterm_returns_the_exit_code() -> None:
    async with Process([PY, "-c", GRACEFUL]) as proc:
        await proc.wait_line("ready", 20)
        assert await proc.stop(timeout=20) == 0
    assert proc.tail()[-1] == "stopped"


async def test_a_line_wait_fails_fast_when_the_process_exits() -> None:
    async with Process([PY, "-c", "import sys; print('bye', file=sys.stderr); sys.exit(4)"]) as p:
        with pytest.raises(ProcessExited) as info:
            await p.wait_line("never printed", timeout=600)
    assert info.value.returncode == 4 and info.value.tail == ["bye"]


async def test_reap_runs_when_the_caller_is_cancelled() -> None:
    started: asyncio.Queue[Process] = asyncio.Queue()

    async def holder() -> None:
        async with Process([PY, "-c", STUBBORN]) as proc:
            await proc.wait_line("grandchild", 20, stream="stdout")
            await started.put(proc)
            await asyncio.Event().wait()

    task = asyncio.create_task(holder())
    proc = await started.get()
    grandchild = int(proc.lines("stdout")[0].split()[1])
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert proc.returncode == -signal.SIGKILL
    assert not alive(grandchild) and live_group_members(proc.pid) == []


async def test_environment_is_scrubbed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HERMES_DASHBOARD_SESSION_TOKEN", "hermes-secret-value")
    monkeypatch.setenv("FAKE_SERVER_ADMIN_PASSWORD", "admin-secret-value")
    monkeypatch.setenv("INNOCENT_LOOKING", f"x{TOKEN}x")
    env = scrubbed_env({"EXTRA": "1"}, secrets=[TOKEN])
    assert "EXTRA" in env and "PATH" in env
    assert not {"HERMES_DASHBOARD_SESSION_TOKEN", "FAKE_SERVER_ADMIN_PASSWORD",
                "INNOCENT_LOOKING"} & set(env)
    async with Process([PY, "-c", "import json, os; print(json.dumps(sorted(os.environ)))"],
                       secrets=[TOKEN]) as proc:
        await proc.wait()
    names = set(json.loads(proc.output()))
    assert "PATH" in names and "EXTRA" not in names and "INNOCENT_LOOKING" not in names
    assert not {n for n in names if n.startswith(("HERMES_", "FAKE_SERVER"))}


async def test_stdin_is_closed() -> None:
    async with Process([PY, "-c", "import sys; print(repr(sys.stdin.read()))"]) as proc:
        assert await proc.wait(20) == 0
    assert proc.lines("stdout") == ["''"]


async def test_a_command_that_does_not_exist() -> None:
    with pytest.raises(StartError, match="cannot start"):
        await Process(["/nonexistent/runner-binary"]).start()


@pytest.mark.skipif(not faketime_installed(), reason="faketime not installed")
async def test_faketime_offset_moves_the_clock_and_keeps_the_exit_code() -> None:
    script = GRACEFUL.replace('print("ready"', 'print(f"now {time.time()}"').replace(
        "import signal, sys", "import signal, sys, time")
    assert faketime_env(-5)["FAKETIME"] == "-5.000000s"
    async with Process([PY, "-c", script], faketime_offset=7200) as proc:
        line = await proc.wait_line("now", 20)
        ahead = float(line.split()[1]) - time.time()
        assert 7000 < ahead < 7400  # an offset of two hours, not a duration measured
        assert await proc.stop(20) == 0  # the child's own code, not the wrapper's -15


@pytest.mark.skipif(not faketime_installed(), reason="faketime not installed")
async def test_a_killed_faketime_child_leaves_no_shared_memory() -> None:
    """libfaketime makes a semaphore and a shared-memory object per process and removes them at
    a clean exit only; a SIGKILL (every crash story) left a pair behind for good."""
    shm = Path("/dev/shm")
    async with Process([PY, "-c", "import signal, sys; print('ready', file=sys.stderr, flush=True); signal.pause()"],
                       faketime_offset=60) as proc:
        await proc.wait_line("ready", 20)
        made = [shm / f"faketime_shm_{proc.pid}", shm / f"sem.faketime_sem_{proc.pid}"]
        assert all(p.exists() for p in made)
        assert await proc.kill() == -signal.SIGKILL
    assert not any(p.exists() for p in made)


# -- adapter.py --------------------------------------------------------------------------------


def config(**extra: Any) -> dict[str, Any]:
    return {"protocol": 1, "serverURL": "http://127.0.0.1:9", "token": TOKEN,
            "runnerId": "0b3c9a9e-2f51-4a8e-9a43-5e8f8e2f6b1c", "hermesURL": "http://127.0.0.1:9",
            "allowedProfiles": ["default"],
            "hermesCredentials": {"username": "u", "password": PASSWORD}, **extra}


class NeverOnline:
    """A control plane on which the runner never comes online."""

    async def wait_online(self, runner_id: str, timeout: float = 10.0) -> str:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    async def wait_epoch_change(self, runner_id: str, old: str | None,
                                timeout: float = 10.0) -> str:
        return await self.wait_online(runner_id, timeout)


def test_bad_templates_are_one_line_errors() -> None:
    with pytest.raises(TemplateError, match=r"\{config\}"):
        RunnerUnderTest("python -m runner_ref --config", config())
    with pytest.raises(TemplateError, match="cannot be split"):
        RunnerUnderTest("python -c 'unbalanced {config}", config())
    assert split_template("run --config {config}", "/tmp/a b/runner.json") == [
        "run", "--config", "/tmp/a b/runner.json"]


async def test_a_command_that_does_not_start() -> None:
    async with RunnerUnderTest("/nonexistent/runner --config {config}", config()) as runner:
        with pytest.raises(RunnerStartError, match="does not start"):
            await runner.start()


async def test_exit_fails_fast_with_code_and_redacted_tail() -> None:
    """A runner that prints its config and exits: wait_online answers at once (not after its
    timeout), with the exit code and the tail, the token redacted; the leak is reported."""
    cmd = "sh -c 'cat \"$0\" >&2; echo; echo \"token was $(cat \"$0\")\" >&2; exit 3' {config}"
    async with RunnerUnderTest(cmd, config()) as runner:
        await runner.start()
        with pytest.raises(RunnerExited) as info:
            await runner.wait_online(NeverOnline(), timeout=600)
        leaks = {leak.secret for leak in runner.leaks()}
    err = info.value
    assert err.returncode == 3 and "code 3" in str(err)
    assert TOKEN not in str(err) and all(TOKEN not in line for line in err.tail)
    assert REDACTED in str(err)
    assert leaks == {"runner token", "Hermes password"}


async def test_config_is_private_and_everything_is_removed_afterwards() -> None:
    cmd = f"{PY} -c {shlex.quote(GRACEFUL)} {{config}}"
    async with RunnerUnderTest(cmd, config()) as runner:
        await runner.start()
        await runner.wait_line("ready", 20)
        directory, path = runner.directory, runner.config_path
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert stat.S_IMODE(directory.stat().st_mode) == 0o700
        (directory / "state").mkdir()  # what a runner keeps beside its config
        (directory / "state" / "ledger").write_text(TOKEN)
        assert await runner.terminate(20) == 0
        await runner.restart()  # same directory, same config
        await runner.wait_line("ready", 20)
        assert runner.config_path == path and (directory / "state" / "ledger").exists()
        assert len(runner.runs) == 2
        assert await runner.stop(20) == 0
        assert runner.leaks() == []
    assert not directory.exists()


async def test_child_environment_never_holds_the_token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOME_CI_VARIABLE", TOKEN)
    cmd = f"{PY} -c 'import os; print(os.environ)' {{config}}"
    async with RunnerUnderTest(cmd, config()) as runner:
        await runner.start()
        assert await runner.wait(20) == 0
        assert runner.leaks() == [] and b"SOME_CI_VARIABLE" not in runner.output()


async def test_identity(tmp_path: Path) -> None:
    script = tmp_path / "fake_runner.py"
    script.write_text("import sys\nif '--version' in sys.argv: print('fake-runner 1.2.3')\n")
    runner = RunnerUnderTest(f"{PY} {script} --config {{config}}", config(), files=[script])
    async with runner:
        ident = await runner.identity()
    assert runner.version_argv() == [PY, str(script), "--version"]
    assert ident["version"] == "fake-runner 1.2.3"
    assert ident["files"][0]["sha256"] == hashlib.sha256(script.read_bytes()).hexdigest()
    silent = RunnerUnderTest(f"{PY} -c {shlex.quote(GRACEFUL)} --config {{config}}", config())
    async with silent:
        assert (await silent.identity(timeout=0.5))["version"] is None


async def test_the_exit_hook_kills_a_group_nobody_reaped() -> None:
    from conformance.process import kill_leftover_groups

    proc = await Process([PY, "-c", STUBBORN]).start()
    try:
        line = await proc.wait_line("grandchild", 20, stream="stdout")
        kill_leftover_groups()
        assert await proc.wait(20) == -signal.SIGKILL
        grandchild = int(line.split()[1])
        # SIGKILL is delivered when the grandchild next runs: under load it may still show as
        # running just after its parent was reaped, so its death is polled for, with a bound
        end = asyncio.get_running_loop().time() + 10
        while alive(grandchild) and live_group_members(proc.pid) \
                and asyncio.get_running_loop().time() < end:
            await asyncio.sleep(0.01)
        assert not alive(grandchild) or live_group_members(proc.pid) == []
    finally:
        await proc.reap()
    assert live_group_members(proc.pid) == []


LIVE_CLOCK_CHILD = """
import sys, time
for _ in range(400):
    print(f"t {time.time()} {time.monotonic()}", file=sys.stderr, flush=True)
    time.sleep(0.05)
"""


@pytest.mark.skipif(not faketime_installed(), reason="faketime not installed")
async def test_live_clock_moves_wall_and_monotonic_time_mid_run(tmp_path: Path) -> None:
    script = tmp_path / "clock.py"
    script.write_text(LIVE_CLOCK_CHILD)
    async with RunnerUnderTest(f"{shlex.quote(PY)} {script} {{config}}", config()) as runner:
        with pytest.raises(AdapterError, match="live_clock"):
            runner.advance_clock(1)   # no run yet
        await runner.start(faketime_offset=100, live_clock=True)
        first = (await runner.wait_line("t ", 20)).split()
        assert 50 < float(first[1]) - time.time() < 150   # the start offset, not a duration
        n = len(runner.process.lines("stderr")) if runner.process else 0
        assert runner.advance_clock(3600) == 3700
        moved = False
        for k in range(1, 200):   # the child prints every 0.05 s: the jump shows within a few
            line = (await runner.wait_line("t ", 20, count=n + k)).split()
            wall, mono = float(line[1]) - float(first[1]), float(line[2]) - float(first[2])
            if wall > 3000:
                assert mono > 3000   # the monotonic clock (asyncio's loop time) moved too
                moved = True
                break
        assert moved
