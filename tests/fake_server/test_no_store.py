"""Every machine-API answer is JSON with ``Cache-Control: no-store`` (§2.1), refusals
``{"error": str, "code": str}`` — including unknown routes, 405, 413, injected faults and an
internal error. A dropped connection is recorded in the history without an answer."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import aiohttp
import pytest

from fake_server import ControlPlane, Registration

from .fake_server_client import Client


async def _raw(http: aiohttp.ClientSession, method: str, url: str, *, headers: dict[str, str] | None = None,
               data: bytes | None = None) -> tuple[int, Any, aiohttp.ClientResponse]:
    async with http.request(method, url, headers=headers or {}, data=data) as resp:
        text = await resp.read()
        return resp.status, json.loads(text) if text else None, resp


def _assert_json_no_store(status: int, body: Any, resp: aiohttp.ClientResponse, code: str | None) -> None:
    assert resp.headers.get("Cache-Control") == "no-store", (status, body)
    assert resp.content_type == "application/json", (status, body)
    if code is None:
        assert status == 200 and isinstance(body, dict)
    else:
        assert isinstance(body, dict) and set(body) == {"error", "code"}, body
        assert isinstance(body["error"], str) and body["code"] == code, (status, body)


async def test_every_answer_is_json_and_no_store(
    cp: ControlPlane, client: Client, http: aiohttp.ClientSession, reg: Registration
) -> None:
    base = f"{cp.url}/api/runner/v1/{reg.runner_id}"
    await client.connect()
    cases: list[tuple[str, str, dict[str, str | None] | None, bytes | None, int, str | None]] = [
        # (method, route or absolute path, header overrides, raw body, status, code)
        ("POST", "admit", None, b'{"id":"x"}', 200, None),
        ("POST", "result", None, b'{"id":"x","result":1}', 200, None),
        ("POST", "admit", {"Origin": "http://127.0.0.1"}, b"{}", 403, "runner_unauthorized"),
        ("POST", "admit", {"x-runner-protocol": "2"}, b"{}", 409, "runner_protocol_mismatch"),
        ("POST", "admit", {"x-runner-epoch": "x:y"}, b"{}", 409, "runner_epoch_changed"),
        ("POST", "heartbeat", None, b"{}", 404, "not_found"),
        ("GET", "poll/extra", None, None, 404, "not_found"),
        ("GET", "/api/runner", None, None, 404, "not_found"),
        ("GET", "/api/runner/", None, None, 404, "not_found"),
        ("GET", "/api/runner/v1/", None, None, 404, "not_found"),
        ("POST", f"/api/runner/v2/{reg.runner_id}/admit", None, b"{}", 404, "not_found"),
        ("GET", "admit", None, None, 405, "method_not_allowed"),
        ("DELETE", "result", None, None, 405, "method_not_allowed"),
        ("OPTIONS", "poll", None, None, 405, "method_not_allowed"),
        ("POST", "admit", None, b"{", 400, "invalid_json"),
        ("POST", "admit", None, b"[]", 400, "invalid_json"),
        ("POST", "result", None, b"x" * (cp.limits.request_body + 1), 413, "runner_payload_limit"),
        ("POST", "result", None, b'{"id":5}', 200, None),  # upstream: no schema, ignored
        ("POST", "event", None, b'{"connectionId":"nope"}', 410, "runner_connection_closed"),
        ("POST", "desktop", None, b"{}", 403, "compose_desktop_forbidden"),
    ]
    for method, route, over, data, status, code in cases:
        url = cp.url + route if route.startswith("/") else f"{base}/{route}"
        headers = client.headers(**(over or {}))  # type: ignore[arg-type]
        got, body, resp = await _raw(http, method, url, headers=headers, data=data)
        assert got == status, (method, route, got, body)
        _assert_json_no_store(got, body, resp, code)

    # injected failure, then a delayed answer: both JSON and no-store
    cp.faults.fail_next("admit", status=503, code="service_updating")
    got, body, resp = await _raw(http, "POST", f"{base}/admit", headers=client.headers(), data=b"{}")
    assert got == 503
    _assert_json_no_store(got, body, resp, "service_updating")
    cp.faults.delay_next("admit", seconds=0.0)
    got, body, resp = await _raw(http, "POST", f"{base}/admit", headers=client.headers(), data=b'{"id":"x"}')
    _assert_json_no_store(got, body, resp, None)


async def test_internal_error_is_json_500_and_the_server_lives_on(
    cp: ControlPlane, client: Client, http: aiohttp.ClientSession, reg: Registration,
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    await client.connect()

    async def boom(runner_id: str, body: dict[str, Any]) -> bool:
        raise RuntimeError(f"secret {reg.token}")

    monkeypatch.setattr(cp.hub, "admit", boom)
    got, body, resp = await _raw(http, "POST", client.url("admit"), headers=client.headers(), data=b'{"id":"x"}')
    assert got == 500
    _assert_json_no_store(got, body, resp, "internal_error")
    assert cp.history[-1].fault == "internal_error"
    monkeypatch.undo()
    assert await client.post("admit", {"id": "x"}) == (200, {"allowed": False})
    err = capsys.readouterr().err
    assert reg.token not in err  # the exception text is never printed


async def test_dropped_answer_is_recorded_without_status(cp: ControlPlane, client: Client) -> None:
    await client.connect()
    cp.faults.drop_next("result")
    with pytest.raises(aiohttp.ClientError):
        await client.post("result", {"id": "x", "result": 1})
    ex = cp.history[-1]
    assert (ex.route, ex.status, ex.fault, ex.response_body) == ("result", None, "drop", None)
    status, _, resp = await client.request("result", body={"id": "x", "result": 1})
    assert status == 200 and resp.headers["Cache-Control"] == "no-store"


async def _raw_http(port: int, data: bytes) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(data)
    await writer.drain()
    answer = await asyncio.wait_for(reader.read(), 10)  # the server closes after an error
    writer.close()
    return answer


@pytest.mark.parametrize(("data", "status", "code"), [
    (b"GARBAGE\r\n\r\n", 400, "bad_request"),
    (b"GET /api/runner/v1/x/poll HTTP/1.1\r\nHost: h\r\nBad Header\r\n\r\n", 400, "bad_request"),
    (b"GET /api/runner/v1/x/poll HTTP/1.1\r\nHost: h\r\nAuthorization: Bearer " + b"s" * 9000 + b"\r\n\r\n",
     431, "request_header_too_large"),
    (b"GET /api/runner/v1/x/poll?" + b"q" * 9000 + b" HTTP/1.1\r\nHost: h\r\n\r\n", 431, "request_header_too_large"),
], ids=["garbage", "bad-header-line", "long-header", "long-url"])
async def test_malformed_http_is_answered_as_json_without_echo(
    cp: ControlPlane, client: Client, data: bytes, status: int, code: str, capsys: pytest.CaptureFixture[str],
) -> None:
    answer = await _raw_http(cp.port, data)
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.split(b"\r\n")[0].split(b" ")[1] == b"%d" % status, head[:80]
    assert b"cache-control: no-store" in head.lower() and b"application/json" in head.lower()
    assert json.loads(body) == {"error": json.loads(body)["error"], "code": code}
    assert b"sss" not in answer and b"qqq" not in answer  # the offending bytes are never echoed
    captured = capsys.readouterr()
    assert "sss" not in captured.err + captured.out
    assert (await client.poll(reset=True))[0] == 200  # and the server lives on
