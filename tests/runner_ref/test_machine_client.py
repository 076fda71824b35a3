"""The machine-API client against a real loopback aiohttp server: headers, errors, odd bodies."""
from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web

from runner_ref.errors import ServerError
from runner_ref.machine_client import MachineClient, features_header

RID = "0b3c9a9e-2f51-4a8e-9a43-5e8f8e2f6b1c"
TOKEN = "tok-" + "x" * 40


@pytest.fixture()
async def server() -> AsyncIterator[tuple[str, list[web.Request], dict[str, Any]]]:
    seen: list[web.Request] = []
    answer: dict[str, Any] = {"status": 200, "body": '{"epoch":"e1","commands":[]}',
                              "headers": {}}

    async def handler(request: web.Request) -> web.Response:
        seen.append(request)
        await request.read()
        return web.Response(status=answer["status"], text=answer["body"],
                            headers=answer["headers"], content_type="application/json")

    app = web.Application()
    app.router.add_route("*", "/api/runner/v1/{rid}/{route}", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]  # the bound (host, port): public AppRunner API
    yield f"http://127.0.0.1:{port}", seen, answer
    await runner.cleanup()


async def test_headers_poll_and_post(server: Any) -> None:
    url, seen, answer = server
    c = MachineClient(url, RID, TOKEN, "inst-1", features_header(True))
    body = await c.poll(reset=True)
    assert body["epoch"] == "e1"
    req = seen[-1]
    assert req.method == "GET" and req.path.endswith("/poll")
    assert req.headers["Authorization"] == f"Bearer {TOKEN}"
    assert req.headers["x-runner-instance"] == "inst-1" and req.headers["x-runner-protocol"] == "1"
    assert req.headers["x-runner-reset"] == "1" and "x-runner-epoch" not in req.headers
    assert "Origin" not in req.headers
    assert req.headers["x-runner-features"] == (
        "execution-context-v1,workspace-memory-bind-v1,managed-browser-disabled-v1,"
        "credential-ref-v1")
    await c.poll(reset=False)
    assert "x-runner-reset" not in seen[-1].headers
    answer["body"] = '{"allowed":true}'
    assert await c.post("admit", {"id": "a"}, epoch="e9") == {"allowed": True}
    assert seen[-1].method == "POST" and seen[-1].headers["x-runner-epoch"] == "e9"
    await c.close()


@pytest.mark.parametrize("status,body,code,message", [
    (403, '{"error":"nope","code":"runner_unauthorized"}', "runner_unauthorized", "nope"),
    (403, "", "runner_unauthorized", "HTTP 403"),
    (500, "<html>", "runner_request_failed", "HTTP 500"),
    (409, '{"error":"' + "e" * 500 + '","code":"runner_epoch_changed"}', "runner_epoch_changed",
     "e" * 300),
    (302, "", "runner_request_failed", "HTTP 302"),
    (503, "[" * 100000 + "]" * 100000, "runner_request_failed", "HTTP 503"),
])
async def test_errors(server: Any, status: int, body: str, code: str, message: str) -> None:
    url, _seen, answer = server
    answer.update(status=status, body=body,
                  headers={"Location": "http://evil.example/"} if status == 302 else {})
    c = MachineClient(url, RID, TOKEN, "inst-1", features_header(True))
    with pytest.raises(ServerError) as info:
        await c.post("result", {"id": "a"})
    assert (info.value.code, info.value.message) == (code, message)
    await c.close()


async def test_malformed_poll_and_unreachable(server: Any) -> None:
    url, _seen, answer = server
    answer["body"] = '{"commands":[]}'
    c = MachineClient(url, RID, TOKEN, "inst-1", features_header(True))
    with pytest.raises(ServerError):
        await c.poll(reset=False)
    await c.close()
    dead = MachineClient("http://127.0.0.1:9", RID, TOKEN, "i", "x")
    with pytest.raises(ServerError) as info:
        await dead.poll(reset=True)
    assert info.value.status == 0 and TOKEN not in str(info.value)
    await dead.close()


async def test_large_poll_read_whole(server: Any) -> None:
    """A poll batch far over one socket read (64 KiB) is read whole, not cut."""
    url, _seen, answer = server
    cmd = {"id": "c1", "kind": "http", "payload": {"pad": "p" * 3_000_000}, "expiresAt": 1}
    answer["body"] = json.dumps({"epoch": "e1", "commands": [cmd] * 4})
    c = MachineClient(url, RID, TOKEN, "inst-1", features_header(True))
    try:
        body = await c.poll(reset=False)
        assert body["commands"] == [cmd] * 4
    finally:
        await c.close()
