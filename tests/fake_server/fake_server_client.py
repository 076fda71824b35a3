"""A small runner-side protocol-1 client for the fake_server tests (real loopback HTTP)."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp


class Client:
    """Speaks the runner side of protocol 1, with every header under the test's control."""

    def __init__(
        self, session: aiohttp.ClientSession, base: str, runner_id: str, token: str,
        instance: str | None = None, features: str | None = "credential-ref-v1",
    ) -> None:
        self.session = session
        self.base = base
        self.runner_id = runner_id
        self.token = token
        self.instance = instance or str(uuid.uuid4())
        self.features = features
        self.epoch: str | None = None

    def url(self, route: str) -> str:
        return f"{self.base}/api/runner/v1/{self.runner_id}/{route}"

    def headers(self, *, reset: bool = False, **over: str | None) -> dict[str, str]:
        h: dict[str, str | None] = {
            "Authorization": f"Bearer {self.token}",
            "x-runner-instance": self.instance,
            "x-runner-protocol": "1",
            "x-runner-features": self.features,
            "x-runner-epoch": self.epoch,
        }
        if reset:
            h["x-runner-reset"] = "1"
        h.update(over)
        return {k: v for k, v in h.items() if v is not None}

    async def request(
        self, route: str, *, method: str | None = None, body: Any = None, raw: bytes | None = None,
        reset: bool = False, headers: dict[str, str | None] | None = None,
    ) -> tuple[int, Any, aiohttp.ClientResponse]:
        method = method or ("GET" if route == "poll" else "POST")
        h = self.headers(reset=reset, **(headers or {}))
        data: bytes | None = raw
        if data is None and body is not None:
            data = json.dumps(body).encode()
        if data is not None:
            h.setdefault("Content-Type", "application/json")
        async with self.session.request(method, self.url(route), data=data, headers=h) as resp:
            text = await resp.read()
            try:
                    payload = json.loads(text) if text else None
            except ValueError:
                payload = text
            return resp.status, payload, resp

    async def poll(self, *, reset: bool = False, **kw: Any) -> tuple[int, Any]:
        status, body, _ = await self.request("poll", reset=reset, **kw)
        if status == 200 and isinstance(body, dict):
            self.epoch = body["epoch"]
        return status, body

    async def post(self, route: str, body: Any, **kw: Any) -> tuple[int, Any]:
        status, payload, _ = await self.request(route, body=body, **kw)
        return status, payload

    async def connect(self) -> str:
        status, body = await self.poll(reset=True)
        assert status == 200, (status, body)
        assert self.epoch is not None
        return self.epoch


Handler = Callable[[dict[str, Any]], Awaitable[dict[str, Any]] | dict[str, Any]]


class AutoRunner:
    """A well-behaved runner loop for tests: poll, admit, answer with ``handler``."""

    def __init__(self, client: Client, handler: Handler | None = None) -> None:
        self.client = client
        self.handler = handler or (lambda cmd: {"result": {"ok": True}})
        self.seen: list[dict[str, Any]] = []
        self.admitted: dict[str, bool] = {}
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> AutoRunner:
        await self.client.connect()
        self._task = asyncio.create_task(self._loop())
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()
        try:
            await self._task
        except (asyncio.CancelledError, Exception):
            pass

    async def _loop(self) -> None:
        while True:
            status, body = await self.client.poll()
            if status != 200:
                await self.client.connect()
                continue
            for cmd in body["commands"]:
                if cmd["id"] in self.admitted:
                    continue
                self.seen.append(cmd)
                asyncio.create_task(self._run(cmd))

    async def _run(self, cmd: dict[str, Any]) -> None:
        _, ans = await self.client.post("admit", {"id": cmd["id"]})
        self.admitted[cmd["id"]] = bool(ans and ans.get("allowed"))
        if not self.admitted[cmd["id"]]:
            reply: dict[str, Any] = {"error": {"message": "not admitted", "code": "runner_command_not_admitted"}}
        else:
            out = self.handler(cmd)
            reply = await out if asyncio.iscoroutine(out) else out  # type: ignore[assignment]
        await self.client.post("result", {"id": cmd["id"], **reply})
