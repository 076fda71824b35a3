"""Demo: start the simulated control plane, register a runner through the admin API, and show
a minimal protocol-1 runner loop connecting, polling, admitting and answering one command.

``python -m fake_server.demo`` — prints each step; exits 0 on success. (The runner side here is
a dozen lines of aiohttp written for the demo; it is not ``runner_ref``.)
"""

from __future__ import annotations

import asyncio
import sys
import uuid

import aiohttp

from .plane import ControlPlane
from .timings import Timings


async def _demo() -> int:
    async with ControlPlane(timings=Timings(poll_hold=2.0)) as cp:
        print(f"control plane listening at {cp.url}")
        jar = aiohttp.CookieJar(unsafe=True)
        async with aiohttp.ClientSession(cookie_jar=jar) as http:
            origin = {"Origin": cp.url}
            async with http.post(f"{cp.url}/api/app/login", headers=origin,
                                 json={"username": cp.admin_user, "password": cp.admin_password}) as r:
                csrf = (await r.json())["csrfToken"]
            async with http.post(f"{cp.url}/api/app/admin/runners",
                                 headers={**origin, "X-CSRF-Token": csrf},
                                 json={"name": "demo-runner", "allowedProfiles": ["default"]}) as r:
                created = await r.json()
            runner_id, token = created["runner"]["id"], created["token"]
            print(f"registered runner {runner_id} (token shown once, not printed here)")

            base = f"{cp.url}/api/runner/v1/{runner_id}"
            headers = {"Authorization": f"Bearer {token}", "x-runner-instance": str(uuid.uuid4()),
                       "x-runner-protocol": "1", "x-runner-features": "credential-ref-v1"}
            async with http.get(f"{base}/poll", headers={**headers, "x-runner-reset": "1"}) as r:
                epoch = (await r.json())["epoch"]
            headers["x-runner-epoch"] = epoch
            print(f"runner connected, epoch {epoch}; online={cp.is_online(runner_id)}")

            async def runner_once() -> None:
                async with http.get(f"{base}/poll", headers=headers) as r:
                    commands = (await r.json())["commands"]
                for cmd in commands:
                    print(f"runner received {cmd['kind']} {cmd['id']}")
                    async with http.post(f"{base}/admit", headers=headers, json={"id": cmd["id"]}) as r:
                        allowed = (await r.json())["allowed"]
                    print(f"admit → allowed={allowed}")
                    result = {"status": 200, "headers": {}, "body": "e30="}
                    async with http.post(f"{base}/result", headers=headers,
                                         json={"id": cmd["id"], "result": result}) as r:
                        await r.read()

            loop_task = asyncio.create_task(runner_once())
            outcome = await cp.command(runner_id, "http", {"path": "/api/status", "method": "GET"})
            await loop_task
            print(f"caller outcome: ok={outcome.ok} status={outcome.status} result={outcome.result}")
            print("history:")
            for ex in cp.history:
                print(f"  #{ex.seq} {ex.method} {ex.route} → {ex.status} {ex.code or ''}")
            async with http.get(f"{cp.url}/api/app/admin/runners") as r:
                listed = (await r.json())["runners"]
            print(f"admin list: {[(x['name'], x['online']) for x in listed]}")
            return 0 if outcome.ok else 1


def main() -> int:
    return asyncio.run(_demo())


if __name__ == "__main__":
    sys.exit(main())
