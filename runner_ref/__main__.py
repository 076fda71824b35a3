"""``python -m runner_ref --config /path/runner.json`` (console script ``hermes-runner-ref``).

``--version`` prints ``hermes-runner-ref <version>`` on stdout and exits 0.

Exit codes: 0 after a graceful stop (first SIGTERM/SIGINT); 1 on a usage error, a config error,
a locked state directory, any start-up failure, or ``runner_unauthorized``. A second signal
kills the process the default way. Output: status lines on stderr only, never a secret.
"""
from __future__ import annotations

import asyncio
import logging
import signal
import sys
import uuid

from . import status
from .config import ConfigError, load_config
from .statedir import LockedError, StateDir, state_dir_for

USAGE = ("usage: hermes-runner-ref --config /path/to/runner.json | --version "
         "(用法：yaoyao-runner --config /path/to/runner.json)")


def parse_args(argv: list[str]) -> str | None:
    """The config path, or None for a usage error."""
    if len(argv) == 2 and argv[0] == "--config" and argv[1]:
        return argv[1]
    if len(argv) == 1 and argv[0].startswith("--config=") and len(argv[0]) > len("--config="):
        return argv[0].split("=", 1)[1]
    return None


def _fatal(message: str) -> int:
    sys.stderr.write(status.redact(message) + "\n")
    sys.stderr.flush()
    return 1


class _StatusLogHandler(logging.Handler):
    """Library warnings become status lines (redacted like every other line)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            status.emit(f"{record.levelname.lower()}: {record.getMessage()}"[:300])
        except Exception:  # noqa: BLE001
            pass


def _quiet_loop_errors(loop: asyncio.AbstractEventLoop, context: dict[str, object]) -> None:
    """An unexpected task failure: one plain line, never a repr that could hold a value."""
    exc = context.get("exception")
    status.emit(f"internal error: {type(exc).__name__ if exc else 'unknown'}")


def _install_signals(stop: asyncio.Event) -> None:
    """First SIGTERM/SIGINT → graceful stop; the handlers run once, so a second signal kills
    the process the default way."""
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(_quiet_loop_errors)

    def on_signal() -> None:
        for s in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(s)
            signal.signal(s, signal.SIG_DFL)
        stop.set()

    for s in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(s, on_signal)


async def _main(config_path: str) -> int:
    stop = asyncio.Event()
    _install_signals(stop)
    try:
        cfg = load_config(config_path)
    except ConfigError as exc:
        return _fatal(str(exc))
    status.add_secret(cfg.token)
    if cfg.hermes_credentials is not None:
        status.add_secret(cfg.hermes_credentials.password)
    instance_id = str(uuid.uuid4())
    state = StateDir(state_dir_for(config_path, cfg.runner_id), instance_id)
    try:
        state.acquire()
    except LockedError as exc:
        return _fatal(str(exc))
    except OSError:
        return _fatal("cannot create the state directory")
    try:
        # Imported once the config is accepted and the state directory locked: a refused start
        # (usage, config, lock) exits before the HTTP stack (aiohttp) and the ledger are loaded.
        from .ledger_store import LedgerStore
        from .poll_loop import PollLoop

        try:
            store = await LedgerStore.open(state.ledger_path)
        except Exception:  # noqa: BLE001
            return _fatal("cannot open the command ledger")
        try:
            code = await PollLoop(cfg, store, instance_id, stop).run()
        finally:
            await store.close()
        if code == 0:
            status.emit(status.STOPPED)
        return code
    finally:
        state.release()


def main(argv: list[str] | None = None) -> int:
    root = logging.getLogger()
    root.handlers[:] = [_StatusLogHandler()]
    root.setLevel(logging.WARNING)
    args = sys.argv[1:] if argv is None else argv
    if args == ["--version"]:
        from . import version

        sys.stdout.write(f"hermes-runner-ref {version()}\n")
        return 0
    path = parse_args(args)
    if path is None:
        return _fatal(USAGE)
    try:
        return asyncio.run(_main(path))
    except Exception:  # noqa: BLE001 - never a traceback that could hold a value
        return _fatal("runner failed")


if __name__ == "__main__":
    sys.exit(main())
