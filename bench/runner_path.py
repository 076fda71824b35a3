"""The runner's own per-command cost, isolated: runner_ref (subprocess) between two minimal
stand-ins in this process — a control plane that only polls/admits/collects results, and a
Hermes that only serves ``GET /``, ``/api/profiles`` and ``/api/status``.

    python -m bench.runner_path [--commands N] [--concurrency C] [--latency-commands L]

Not a conformance check of anything: the stand-ins skip every gate, redelivery and history, so
what is left is the runner (ledger commits included) plus two bare aiohttp servers. Prints the
runner's CPU per command and the latency/throughput figures beside the same floors as
``e2e_commands.py`` (``bench/floors.py``). Figures only; see docs/bench.md.
"""
from __future__ import annotations

import argparse
import asyncio
import secrets
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from aiohttp import web

from bench.floors import Latency, floor_commit, floor_round_trip, ms
from bench.processes import REPO, Runner, cpu_seconds, user_system

EPOCH = f"{uuid.uuid4()}:{uuid.uuid4()}"


class StandIns:
    """A minimal control plane (one runner) and a minimal Hermes on 127.0.0.1, port 0."""

    def __init__(self) -> None:
        self.queue: list[dict[str, Any]] = []
        self.waiting: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self.wake = asyncio.Event()
        self.polls = 0
        self.first_poll = asyncio.Event()
        self.token = secrets.token_urlsafe(24)
        self.hermes_token = secrets.token_urlsafe(24)
        self.runners: list[web.AppRunner] = []
        self.cp_url = self.hermes_url = ""

    async def start(self) -> None:
        cp = web.Application()
        cp.router.add_get("/api/runner/v1/{rid}/poll", self.poll)
        cp.router.add_post("/api/runner/v1/{rid}/admit", self.admit)
        cp.router.add_post("/api/runner/v1/{rid}/result", self.result)
        hermes = web.Application()
        hermes.router.add_get("/", self.page)
        hermes.router.add_get("/api/status", self.status)
        hermes.router.add_get("/api/profiles", self.profiles)
        urls = []
        for app in (cp, hermes):
            runner = web.AppRunner(app, access_log=None)
            await runner.setup()
            site = web.TCPSite(runner, "127.0.0.1", 0)
            await site.start()
            self.runners.append(runner)
            urls.append(f"http://127.0.0.1:{runner.addresses[0][1]}")
        self.cp_url, self.hermes_url = urls

    async def stop(self) -> None:
        for r in self.runners:
            await r.cleanup()

    def _auth(self, request: web.Request) -> None:
        if request.headers.get("Authorization") != f"Bearer {self.token}":
            raise web.HTTPForbidden(text='{"error":"no","code":"runner_unauthorized"}',
                                    content_type="application/json")

    async def poll(self, request: web.Request) -> web.Response:
        self._auth(request)
        self.polls += 1
        self.first_poll.set()
        if not self.queue and request.headers.get("x-runner-reset") != "1":
            self.wake.clear()
            try:
                await asyncio.wait_for(self.wake.wait(), 15)
            except TimeoutError:
                pass
        batch, self.queue = self.queue[:64], self.queue[64:]
        return web.json_response({"epoch": EPOCH, "commands": batch})

    async def admit(self, request: web.Request) -> web.Response:
        self._auth(request)
        await request.read()
        return web.json_response({"allowed": True})

    async def result(self, request: web.Request) -> web.Response:
        self._auth(request)
        body = await request.json()
        fut = self.waiting.pop(body["id"], None)
        if fut is not None and not fut.done():
            fut.set_result(body)
        return web.json_response({"ok": True})

    async def page(self, request: web.Request) -> web.Response:
        return web.Response(text=f'<script>window.__HERMES_SESSION_TOKEN__="{self.hermes_token}"'
                                 ";</script>", content_type="text/html")

    async def status(self, request: web.Request) -> web.Response:
        return web.json_response({"version": "0.19.0", "auth_required": False})

    async def profiles(self, request: web.Request) -> web.Response:
        if request.headers.get("X-Hermes-Session-Token") != self.hermes_token:
            return web.json_response({"detail": "Unauthorized"}, status=401)
        return web.json_response([{"name": "default"}])

    async def command(self) -> dict[str, Any]:
        cid = str(uuid.uuid4())
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.waiting[cid] = fut
        self.queue.append({"id": cid, "kind": "http",
                           "payload": {"path": "/api/status", "method": "GET"},
                           "expiresAt": int(time.time() * 1000) + 30_000})
        self.wake.set()
        return await fut


async def drive(s: StandIns, n: int, concurrency: int, runner_pid: int | None
                ) -> tuple[float, Latency, float, float, float]:
    """(commands/s, latency, runner CPU ms/command, its system share, stand-ins CPU
    ms/command)."""
    lat: list[float] = []
    left = n
    cpu0, own0 = cpu_seconds(runner_pid), cpu_seconds(None)
    sys0 = user_system(runner_pid)[1]

    async def worker() -> None:
        nonlocal left
        while left > 0:
            left -= 1
            t = time.perf_counter()
            out = await s.command()
            assert "result" in out, out
            lat.append(time.perf_counter() - t)

    began = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    wall = time.perf_counter() - began
    cpu = cpu_seconds(runner_pid) - cpu0
    system = user_system(runner_pid)[1] - sys0
    return (n / wall, Latency.of(lat), cpu / n * 1000, system / cpu if cpu > 0 else 0.0,
            (cpu_seconds(None) - own0) / n * 1000)


async def main_async(args: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory(prefix="bench-runner-") as tmp:
        work = Path(tmp)
        rt = await floor_round_trip(args.floor_samples)
        commit = await floor_commit(work, max(50, args.floor_samples // 4))
        floor = 4 * rt.p50 + 2 * commit.p50
        s = StandIns()
        await s.start()
        config = {"protocol": 1, "serverURL": s.cp_url, "runnerId": str(uuid.uuid4()),
                  "token": s.token, "hermesURL": s.hermes_url, "allowedProfiles": ["default"]}
        runner = Runner(work, config, args.profile, args.switch_interval, src=args.runner_src)
        await runner.start()
        try:
            await runner.adapter.guard(s.first_poll.wait(), "its first poll", 30)
            for _ in range(args.warmup):
                await s.command()
            pid = runner.pid
            print(f"# runner_path  floor (4 round trips + 2 commits, p50s) {ms(floor)}  "
                  f"round trip p50 {ms(rt.p50)}  commit p50 {ms(commit.p50)}")
            for label, n, c in (("latency", args.latency_commands, 1),
                                ("throughput", args.commands, args.concurrency)):
                if n <= 0:
                    continue
                rate, lat, cpu, system, own = await drive(s, n, c, pid)
                print(f"{label:10s} C={c:<3d} {rate:8.1f} commands/s  p50 {ms(lat.p50)} "
                      f"({lat.p50 / floor:4.1f}x)  p99 {ms(lat.p99)} ({lat.p99 / floor:4.1f}x)  "
                      f"runner CPU {cpu:.3f} ms/command ({system:.0%} system)  stand-ins CPU {own:.3f} ms/command")
        finally:
            code = await runner.stop()
            await s.stop()
        print(f"runner exit code after SIGTERM: {code}")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--commands", type=int, default=3000)
    ap.add_argument("--latency-commands", type=int, default=1000)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--floor-samples", type=int, default=1000)
    ap.add_argument("--switch-interval", type=float, default=None, metavar="SECONDS",
                    help="experiment: sys.setswitchinterval in the runner")
    ap.add_argument("--runner-src", default=str(REPO), metavar="DIR",
                    help="directory holding the runner_ref package (to A/B against a copy)")
    ap.add_argument("--profile", default=None, metavar="FILE",
                    help="run the runner under cProfile and write its stats to FILE")
    args = ap.parse_args(argv)
    args.runner_src = Path(args.runner_src).resolve()
    return asyncio.run(main_async(args))


if __name__ == "__main__":
    sys.exit(main())
