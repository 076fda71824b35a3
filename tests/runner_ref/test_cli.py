"""The CLI as a process: usage, config errors, the lock, signals (no control plane needed)."""
from __future__ import annotations

import signal
import socket
from pathlib import Path
from typing import Any

from .runner_proc import RunnerProcess, write_config

TOKEN = "tok_" + "S3cr3t" * 8
PASSWORD = "pw-" + "Qz9" * 6


def cfg(port: int, **extra: Any) -> dict[str, Any]:
    return {"protocol": 1, "serverURL": f"http://127.0.0.1:{port}",
            "runnerId": "0b3c9a9e-2f51-4a8e-9a43-5e8f8e2f6b1c", "token": TOKEN,
            "hermesURL": "http://127.0.0.1:9", "allowedProfiles": ["default"], **extra}


def dead_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return int(port)


def assert_clean(out: bytes) -> None:
    assert TOKEN.encode() not in out and PASSWORD.encode() not in out


async def run_to_exit(tmp_path: Path, args: list[str] | None = None,
                      raw: dict[str, Any] | None = None, mode: int = 0o600) -> tuple[int, str]:
    path = write_config(tmp_path, raw if raw is not None else cfg(dead_port()), mode)
    r = await RunnerProcess(path, args=args).start()
    try:
        code = await r.wait(15)
        assert_clean(r.output())
        return code, r.stderr()
    finally:
        await r.reap()


async def test_usage_without_config(tmp_path: Path) -> None:
    code, err = await run_to_exit(tmp_path, args=[])
    assert code == 1 and "--config" in err
    code, err = await run_to_exit(tmp_path, args=["--conf", "x"])
    assert code == 1 and "usage" in err


async def test_mode_0644_refused(tmp_path: Path) -> None:
    code, err = await run_to_exit(tmp_path, mode=0o644)
    assert code == 1 and "chmod 600" in err


async def test_invalid_config_never_echoes_secrets(tmp_path: Path) -> None:
    raw = cfg(1, hermesURL="http://10.0.0.1:9119",
              hermesCredentials={"username": "u", "password": PASSWORD})
    code, err = await run_to_exit(tmp_path, raw=raw)
    assert code == 1 and "Runner must connect to local Hermes" in err
    code, err = await run_to_exit(tmp_path, raw={**cfg(1), "command": TOKEN})
    assert code == 1 and "invalid node configuration" in err


async def test_second_instance_exits_1_and_sigterm_stops(tmp_path: Path) -> None:
    path = write_config(tmp_path, cfg(dead_port()))
    first = await RunnerProcess(path).start()
    second: RunnerProcess | None = None
    try:
        await first.wait_output("reconnecting")  # alive, lock held, server unreachable
        second = await RunnerProcess(path).start()
        assert await second.wait(15) == 1
        assert "already used by another Yaoyao service" in second.stderr()
        first.signal(signal.SIGTERM)
        assert await first.wait(15) == 0
        assert "stopped" in first.stderr()
        assert_clean(first.output() + second.output())
        state = tmp_path / "state" / cfg(1)["runnerId"]
        assert (state / "runner-commands.sqlite3").exists()
        assert not (state / "service-instance.json").exists()
    finally:
        await first.reap()
        if second is not None:
            await second.reap()


async def test_sigint_is_graceful_too(tmp_path: Path) -> None:
    path = write_config(tmp_path, cfg(dead_port()))
    r = await RunnerProcess(path).start()
    try:
        await r.wait_output("reconnecting")
        r.signal(signal.SIGINT)
        assert await r.wait(15) == 0
        assert "stopped" in r.stderr() and "Traceback" not in r.stderr()
        assert_clean(r.output())
    finally:
        await r.reap()


def project_version() -> str:
    import tomllib

    pyproject = Path(__file__).resolve().parents[2] / "pyproject.toml"
    return str(tomllib.loads(pyproject.read_text())["project"]["version"])


def test_the_source_version_is_the_project_version() -> None:
    import runner_ref

    assert runner_ref.SOURCE_VERSION == project_version()  # a source checkout answers the same


async def test_version_prints_the_project_version(tmp_path: Path) -> None:
    want = project_version()
    r = await RunnerProcess(tmp_path / "unused.json", args=["--version"]).start()
    try:
        assert await r.wait(15) == 0
        assert r.output().decode().strip() == f"hermes-runner-ref {want}"  # stdout, no stderr
    finally:
        await r.reap()
