"""Control-plane throughput probe: poll → admit → result cycles per second, in one process.

    python -m bench.perf_cycle [--commands N] [--concurrency C] [--account]
                               [--profile FILE] [--repeat R]

A ControlPlane (system clock, default timings) and a minimal runner loop over real loopback
HTTP (one long poll, then ``admit`` and ``result`` per command, as fast as it can) share one
process and one event loop, so the figure is the control plane's cost plus a lean client's.
Prints commands/s and CPU ms per command; ``--profile`` writes cProfile stats. Not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import os
import time
import uuid
from typing import Any

import aiohttp

from fake_server import ControlPlane

STATUS = {"path": "/api/status", "method": "GET"}
RESULT = {"status": 200, "headers": {"content-type": "application/json"}, "body": "eyJvayI6dHJ1ZX0="}


async def runner_loop(http: aiohttp.ClientSession, base: str, token: str, stop: asyncio.Event) -> None:
    instance = str(uuid.uuid4())
    headers = {"Authorization": f"Bearer {token}", "x-runner-instance": instance, "x-runner-protocol": "1",
               "x-runner-features": "execution-context-v1,workspace-memory-bind-v1,credential-ref-v1"}
    async with http.get(f"{base}/poll", headers={**headers, "x-runner-reset": "1"}) as r:
        epoch = (await r.json())["epoch"]
    post_headers = {**headers, "x-runner-epoch": epoch, "Content-Type": "application/json"}
    inflight: set[str] = set()
    tasks: set[asyncio.Task[None]] = set()

    async def run(cmd: dict[str, Any]) -> None:
        cid = cmd["id"]
        async with http.post(f"{base}/admit", data=json.dumps({"id": cid}), headers=post_headers) as r:
            allowed = (await r.json())["allowed"]
        body = {"id": cid, "result": RESULT} if allowed else {
            "id": cid, "error": {"message": "not admitted", "code": "runner_command_not_admitted"}}
        async with http.post(f"{base}/result", data=json.dumps(body), headers=post_headers) as r:
            await r.read()
        inflight.discard(cid)

    while not stop.is_set():
        async with http.get(f"{base}/poll", headers=headers) as r:
            body = await r.json()
        for cmd in body.get("commands", ()):
            if cmd["id"] in inflight:
                continue
            inflight.add(cmd["id"])
            t = asyncio.create_task(run(cmd))
            tasks.add(t)
            t.add_done_callback(tasks.discard)


async def measure(n: int, concurrency: int, account: bool) -> tuple[float, float]:
    async with ControlPlane() as cp:
        reg = await cp.register_runner(allowed_profiles=["default"])
        acc = None
        if account:
            await cp.create_account("alice", allowed_profiles=["default"])
            acc = "alice"
        base = f"{cp.url}/api/runner/v1/{reg.runner_id}"
        stop = asyncio.Event()
        conn = aiohttp.TCPConnector(limit=concurrency * 2 + 4)
        async with aiohttp.ClientSession(connector=conn) as http:
            loop_task = asyncio.create_task(runner_loop(http, base, reg.token, stop))
            await cp.wait_online(reg.runner_id)
            remaining = n
            failures = 0

            async def worker() -> None:
                nonlocal remaining, failures
                while remaining > 0:
                    remaining -= 1
                    out = await cp.command(reg.runner_id, "http", STATUS, account=acc)
                    if not out.ok:
                        failures += 1

            for _ in range(2):  # warm up
                await cp.command(reg.runner_id, "http", STATUS, account=acc)
            t0, c0 = time.perf_counter(), time.process_time()
            await asyncio.gather(*[worker() for _ in range(concurrency)])
            wall, cpu = time.perf_counter() - t0, time.process_time() - c0
            stop.set()
            await cp.submit(reg.runner_id, "http", STATUS)  # wake the held poll
            loop_task.cancel()
            try:
                await loop_task
            except (asyncio.CancelledError, Exception):
                pass
            if failures:
                print(f"  failures: {failures}")
            return n / wall, cpu / n * 1000


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--commands", type=int, default=3000)
    p.add_argument("--concurrency", type=int, default=32)
    p.add_argument("--account", action="store_true", help="commands on behalf of an account")
    p.add_argument("--profile", default=None)
    p.add_argument("--repeat", type=int, default=1)
    args = p.parse_args()
    print(f"# perf_cycle commands={args.commands} concurrency={args.concurrency} account={args.account}"
          f" loadavg={os.getloadavg()[0]:.2f}")
    for _ in range(args.repeat):
        prof = cProfile.Profile() if args.profile else None
        if prof:
            prof.enable()
        rate, cpu_ms = asyncio.run(measure(args.commands, args.concurrency, args.account))
        if prof:
            prof.disable()
            prof.dump_stats(args.profile)
        print(f"{rate:8.1f} commands/s   CPU {cpu_ms:.3f} ms/command (control plane + lean runner loop)")


if __name__ == "__main__":
    main()
