"""Cases for sentences of docs/protocol.md that no family case tests (IDs 900–999).

The runner is a black box: these cases look only at what it leaves on disk, its exit code and
its output, through the world's runner adapter.
"""

from __future__ import annotations

from typing import Any

from conformance.marks import case
from conformance.process import Process, scrubbed_env
from conformance.verdict import expect

EXIT_TIMEOUT = 15.0


@case("CFG-902", start_runner=False)
async def test_without_config_exits_1(world: Any) -> None:
    """fails when: the runner started without --config exits 0, keeps running (e.g. looks for
    a default file) or crashes with another code."""
    runner = world.runner
    runner.write_config()
    argv = runner.version_argv()[:-1]  # the template without "--config {config}" and --version
    proc = Process(argv, env=scrubbed_env(secrets=runner.secrets), cwd=runner.directory)
    await proc.start()
    try:
        code: int | None = await proc.wait(EXIT_TIMEOUT)
    except TimeoutError:
        code = None
    finally:
        if proc.running:
            await proc.stop(5)
    expect(code == 1, expected="exit code 1 without --config",
           actual="still running" if code is None else f"exit code {code}",
           witness=runner.secrets.redact(b"\n".join(line.encode() for line in proc.tail(5)).decode()))
