"""Standalone simulated control plane.

``python -m fake_server --host 127.0.0.1 --port 0 --ready-file PATH [--admin-user admin]
[--admin-password …] [--db PATH] [--poll-hold S] [--redelivery S] [--watchdog-tick S]
[--offline-after S] [--history-max-entries N] [--allowed-host H]…`` prints
``FAKE_SERVER_READY url=http://127.0.0.1:N`` and writes ``{"url": …}`` to the ready file.
SIGTERM or SIGINT → clean exit 0. Restart as a process = start again with the same ``--db``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
from pathlib import Path

from .plane import ControlPlane
from .timings import Timings


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m fake_server", description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--ready-file", type=Path, default=None)
    p.add_argument("--admin-user", default="admin")
    p.add_argument("--admin-password", default=None,
                   help="admin password (default: $FAKE_SERVER_ADMIN_PASSWORD, else random and not shown)")
    p.add_argument("--db", type=Path, default=None, help="SQLite path (default: a temp file)")
    p.add_argument("--poll-hold", type=float, default=Timings.poll_hold)
    p.add_argument("--redelivery", type=float, default=Timings.redelivery)
    p.add_argument("--watchdog-tick", type=float, default=Timings.watchdog_tick)
    p.add_argument("--offline-after", type=float, default=Timings.offline_after)
    p.add_argument("--allowed-host", action="append", default=None, metavar="HOST[:PORT]",
                   help="Host header the machine API accepts (repeatable; '*' = any). Default: this"
                        " server's address and 127.0.0.1/localhost/[::1] with its port")
    p.add_argument("--history-max-entries", type=int, default=None,
                   help="keep only the newest N machine-API exchanges (default: all)")
    return p


async def _run(args: argparse.Namespace) -> int:
    timings = Timings(
        poll_hold=args.poll_hold, redelivery=args.redelivery,
        watchdog_tick=args.watchdog_tick, offline_after=args.offline_after,
    )
    password = args.admin_password or os.environ.get("FAKE_SERVER_ADMIN_PASSWORD")
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with ControlPlane(
        db_path=args.db, timings=timings, admin_user=args.admin_user, admin_password=password,
        host=args.host, port=args.port, history_max_entries=args.history_max_entries,
        allowed_hosts=args.allowed_host,
    ) as cp:
        if args.ready_file is not None:
            tmp = args.ready_file.with_name(args.ready_file.name + ".tmp")
            tmp.write_text(json.dumps({"url": cp.url}))
            os.replace(tmp, args.ready_file)
        print(f"FAKE_SERVER_READY url={cp.url}", flush=True)
        await stop.wait()
    return 0


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return asyncio.run(_run(args))
    except OSError as e:
        print(f"fake_server: cannot start: {e.strerror or e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
