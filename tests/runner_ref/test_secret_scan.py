"""The shared no-secret assertion can fail: a fake runner that prints its config is caught."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from .runner_proc import RunnerProcess, write_config
from .secret_scan import config_secrets, leaks, scan
from .stub_hermes import StubHermes

TOKEN = "tok_" + "L3ak" * 10
PASSWORD = "pw-" + "Zx8" * 5


def test_config_secrets_and_leaks(tmp_path: Path) -> None:
    path = write_config(tmp_path, {"token": TOKEN, "hermesCredentials": {"password": PASSWORD},
                                   "command": {"token": "nested-" + TOKEN}})
    found = config_secrets(path)
    assert set(found) == {TOKEN, PASSWORD, "nested-" + TOKEN}
    assert leaks(b"x " + PASSWORD.encode() + b" y", found)
    assert not leaks(b"x [redacted] y", found)
    assert TOKEN not in " ".join(leaks(TOKEN.encode(), found))  # the hint never holds the value
    (tmp_path / "bad.json").write_text("{")
    assert config_secrets(tmp_path / "bad.json") == []


async def test_scan_catches_a_leaking_process(tmp_path: Path) -> None:
    path = write_config(tmp_path, {"token": TOKEN})
    r = RunnerProcess(path, args=[str(path)])
    r.launcher = ["-c", "import sys; sys.stderr.write(open(sys.argv[1]).read())"]
    await r.start()
    try:
        assert await r.wait(15) == 0
        with pytest.raises(AssertionError, match="leaked"):
            scan([r], [])
        async with StubHermes() as hermes:   # a Hermes session token is scanned too
            r.stderr_path.write_text(f"token {hermes.token}\n")
            with pytest.raises(AssertionError, match="leaked"):
                scan([r], [hermes])
    finally:
        r.stderr_path.write_text("")   # leave nothing for the autouse teardown scan
        await r.reap()
    assert sys.executable
