"""The standalone control plane: ready line and file, SIGTERM exit 0, restart keeps state."""

from __future__ import annotations

import signal
from pathlib import Path

import aiohttp

from fake_server.process import FakeServerProcess

from .fake_server_client import Client


async def test_standalone_register_poll_restart(tmp_path: Path) -> None:
    db = tmp_path / "cp.sqlite3"
    async with FakeServerProcess(db_path=db, admin_password="s3cret-pass") as proc, aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as http:
        assert proc.url.startswith("http://127.0.0.1:")
        base = proc.url
        # register through the admin API (login answers the CSRF token)
        async with http.post(f"{base}/api/app/login", json={"username": "admin", "password": "s3cret-pass"},
                             headers={"Origin": base}) as r:
            assert r.status == 200, await r.text()
            csrf = (await r.json())["csrfToken"]
        async with http.post(f"{base}/api/app/admin/runners",
                             json={"name": "r1", "allowedProfiles": ["default"]},
                             headers={"Origin": base, "X-CSRF-Token": csrf}) as r:
            assert r.status == 201, await r.text()
            created = await r.json()
        runner_id, token = created["runner"]["id"], created["token"]
        client = Client(http, base, runner_id, token)
        first = await client.connect()
        await proc.restart()
        assert proc.url == base  # same port
        client.base = proc.url
        second = await client.connect()  # registration survived the restart
        assert first.split(":")[0] != second.split(":")[0]
        assert await proc.stop() == 0
        await proc.restart(signal.SIGKILL)
        client.base = proc.url
        assert (await client.poll(reset=True))[0] == 200
        assert await proc.stop(signal.SIGTERM) == 0
    assert proc.returncodes[0] == 0


async def test_ready_file_and_line(tmp_path: Path) -> None:
    import asyncio
    import json
    import sys

    ready = tmp_path / "ready.json"
    p = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "fake_server", "--host", "127.0.0.1", "--port", "0",
        "--ready-file", str(ready), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        start_new_session=True)
    assert p.stdout is not None and p.stderr is not None
    line = (await asyncio.wait_for(p.stdout.readline(), 20)).decode().strip()
    url = json.loads(ready.read_text())["url"]
    assert line == f"FAKE_SERVER_READY url={url}"
    p.send_signal(signal.SIGTERM)
    assert await asyncio.wait_for(p.wait(), 10) == 0
    assert b"Traceback" not in await p.stderr.read()


async def test_demo_runs(capsys: object) -> None:
    from fake_server.demo import _demo

    assert await _demo() == 0


async def test_cli_allowed_host_and_history_cap_options(tmp_path: Path) -> None:
    import asyncio
    import sys

    from fake_server.__main__ import _parser

    args = _parser().parse_args(["--allowed-host", "cp.test:8443", "--allowed-host", "*",
                                 "--history-max-entries", "7"])
    assert args.allowed_host == ["cp.test:8443", "*"] and args.history_max_entries == 7
    assert _parser().parse_args([]).allowed_host is None

    p = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "fake_server", "--port", "0", "--allowed-host", "cp.test:8443",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, start_new_session=True)
    try:
        assert p.stdout is not None
        line = (await asyncio.wait_for(p.stdout.readline(), 20)).decode().strip()
        url = line.split("url=", 1)[1]
        async with aiohttp.ClientSession() as http:
            async with http.get(f"{url}/api/runner/v1/{'0' * 36}/poll") as r:
                assert (r.status, (await r.json())["code"]) == (421, "invalid_host")
            async with http.get(f"{url}/api/runner/v1/{'0' * 36}/poll", headers={"Host": "cp.test:8443"}) as r:
                assert (r.status, (await r.json())["code"]) == (403, "runner_unauthorized")
    finally:
        p.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(p.wait(), 10) == 0
