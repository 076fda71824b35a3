"""The machine-API fuzz's side of the wire: the ControlPlane on its own loop behind a conformance
Portal (``Server``), and a legitimate runner's moves (connect, answer commands, keep a channel
and lease alive for the fuzz to aim at)."""
from __future__ import annotations

import uuid
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any, TypeVar

import httpx

from conformance.portal import Portal

T = TypeVar("T")


# -- a ControlPlane on its own loop, behind a conformance Portal ------------------------------
@dataclass
class Server:
    cp: Any
    portal: Portal
    runner_id: str
    token: str = field(repr=False)
    other_runner: str
    other_token: str = field(repr=False)
    disabled_runner: str
    disabled_token: str = field(repr=False)
    instance: str = ""
    secrets: list[str] = field(default_factory=list, repr=False)
    connection_id: str = ""
    lease_id: str = ""
    setups: int = 0

    def call(self, coro: Coroutine[Any, Any, T], timeout: float = 30.0) -> T:
        return self.portal.run(coro, timeout=timeout)

    def lease_alive(self) -> bool:
        async def alive() -> bool:
            slot = self.cp.hub.slots.get(self.runner_id)
            lease = slot.leases.get(self.lease_id) if slot is not None else None
            return bool(lease is not None and lease.active
                         and await self.cp.hub.channel_valid(lease.channel))
        return bool(self.lease_id) and self.call(alive())

    def epoch(self) -> str | None:
        async def get() -> str | None:
            return self.cp.epoch(self.runner_id)  # type: ignore[no-any-return]
        return self.call(get())


def legit_headers(srv: Server, *, reset: bool = False, epoch: str | None = None) -> dict[str, str]:
    h = {"Authorization": f"Bearer {srv.token}", "x-runner-instance": srv.instance,
         "x-runner-protocol": "1",
         "x-runner-features": "execution-context-v1,workspace-memory-bind-v1,credential-ref-v1"}
    if reset:
        h["x-runner-reset"] = "1"
    if epoch is not None:
        h["x-runner-epoch"] = epoch
    return h


def connect(srv: Server, client: httpx.Client) -> str:
    """Become the runner's current instance with a reset poll; returns the epoch."""
    srv.instance = str(uuid.uuid4())
    resp = client.get(f"/api/runner/v1/{srv.runner_id}/poll", headers=legit_headers(srv, reset=True))
    assert resp.status_code == 200, resp.text
    return str(resp.json()["epoch"])


def answer_commands(srv: Server, client: httpx.Client, fut: Any) -> Any:
    """Act as the runner (poll, admit, result ``{ok:true}``) until ``fut`` resolves."""
    base = f"/api/runner/v1/{srv.runner_id}"
    for _ in range(200):  # bounded: each poll is held at most poll_hold (0.05 s)
        if fut.done():
            return fut.result()
        resp = client.get(f"{base}/poll", headers=legit_headers(srv))
        assert resp.status_code == 200, resp.text
        epoch = resp.json()["epoch"]
        for cmd in resp.json()["commands"]:
            h = legit_headers(srv, epoch=epoch)
            client.post(f"{base}/admit", headers=h, json={"id": cmd["id"]})
            client.post(f"{base}/result", headers=h, json={"id": cmd["id"], "result": {"ok": True}})
    return fut.result(timeout=10)


def ensure_lease(srv: Server, client: httpx.Client) -> None:
    """Keep a live channel and hub lease for the fuzz to aim at (fuzz may disconnect them)."""
    if srv.lease_alive():
        return
    srv.setups += 1
    resp = client.get(f"/api/runner/v1/{srv.runner_id}/poll",
                      headers=legit_headers(srv, reset=True))
    if resp.status_code != 200:  # our instance was retired by a fuzzed poll: start afresh
        connect(srv, client)
    cp, portal = srv.cp, srv.portal
    ch = answer_commands(srv, client, portal.soon(
        cp.open_channel(srv.runner_id, profile="default")))
    lease = answer_commands(srv, client, portal.soon(cp.create_lease(
        ch, profile="default", session={"runtimeId": "5748f884", "storedId": "s1"},
        tools=[{"id": "create_member", "name": "create_member", "description": "",
                "inputSchema": {"type": "object"}}],
        handlers={"*": lambda tool_id, args: {"done": tool_id}})))
    srv.connection_id, srv.lease_id = ch.connection_id, lease.lease_id
