"""CFG — config and process, the state directory: where it lives, its mode, its single-instance
lock and the service-instance file (§1.4).

Observed from outside: the files beside runner.json, the exit code of a second process and the
instance ids on the wire.
"""

from __future__ import annotations

import json
import stat
from typing import Any

from conformance.marks import case
from conformance.verdict import expect
from conformance.witness import lines_of, output_lines

from ._helpers_process import (
    STATUS,
    exit_code,
    mode_of,
    reap_only,
    same_dir_runner,
    state_dir,
    world_exchanges,
)
from ._helpers_wire import describe, http


@case("CFG-008")
async def test_second_process_on_the_state_dir_exits_1(world: Any) -> None:
    """fails when: the runner takes no single-instance lock (the second process polls and
    replaces the first), or the second one exits 0 / keeps running."""
    first = {ex.instance for ex in world_exchanges(world)}
    mark = world.cp.history.last_seq
    second = same_dir_runner(world)
    try:
        await second.start()
        code = await exit_code(second, "a second process on the same state directory")
        expect(code == 1, expected="the second process exits with code 1", actual=code,
               witness=output_lines(second.stderr_text(), last=3))
        expect(not second.leaks(), expected="no secret printed", actual=second.leaks())
    finally:
        await reap_only(second)
    others = [ex for ex in world.cp.history.since(mark) if ex.instance not in first]
    expect(not others, expected="no request from the second process",
           actual=f"{len(others)} request(s) of another instance",
           witness=lines_of(world, others[:5]))
    out = await world.cp.command(world.runner_id, "http", dict(STATUS))
    expect(out.ok, expected="the first runner still works: GET /api/status → 200",
           actual=f"{out.status} {out.code}")


@case("CFG-009")
async def test_state_lives_beside_the_config(world: Any) -> None:
    """fails when: the runner keeps its state elsewhere (cwd, home, /tmp, state/ without the
    runnerId)."""
    where = state_dir(world.runner)
    expect(where.is_dir(), expected=f"a directory state/{world.runner_id}/ beside runner.json",
           actual="missing")
    files = [p for p in where.rglob("*") if p.is_file()]
    expect(files, expected="state files in it (lock, ledger)", actual="an empty directory")


@case("CFG-013")
async def test_state_dir_is_0700(world: Any) -> None:
    """fails when: the state directory is created with the process umask (e.g. 0755)."""
    where = state_dir(world.runner)
    expect(where.is_dir(), expected="the state directory exists", actual="missing")
    expect(mode_of(where) == 0o700, expected="state directory mode 0700",
           actual=oct(mode_of(where)))


@case("CFG-017")
async def test_service_instance_file_names_the_instance(world: Any) -> None:
    """fails when: service-instance.json holds another instance id than the one on the wire, or
    is left behind after a clean exit."""
    info_path = state_dir(world.runner) / "service-instance.json"
    expect(info_path.is_file(), expected="state/<runnerId>/service-instance.json", actual="missing")
    try:
        info = json.loads(info_path.read_text())
    except ValueError:
        info = None
    wire = {ex.instance for ex in world_exchanges(world)}
    expect(isinstance(info, dict) and info.get("instanceId") in wire and len(wire) == 1,
           expected=f"instanceId = the x-runner-instance on the wire {sorted(wire)}",
           actual=world.redact(json.dumps(info))[:300])
    code = await world.runner.terminate(15)
    expect(code == 0, expected="exit code 0", actual=code)
    expect(not info_path.exists(), expected="service-instance.json deleted at a clean exit",
           actual="still there")


@case("CFG-903")
async def test_state_files_are_0600(world: Any) -> None:
    """After a command ran (so the ledger and its journal exist), every regular file under the
    state directory has no group or other permission bits.

    fails when: the runner creates the ledger (or the lock, the instance file, a journal) with
    the process umask, e.g. 0644."""
    _, out = await http(world, "/api/status", profile=None)
    expect(out.ok, expected="GET /api/status relayed", actual=describe(out))
    where = state_dir(world.runner)
    files = sorted(p for p in where.rglob("*") if p.is_file())
    expect(files, expected="files in the state directory", actual="none")
    loose = [f"{p.relative_to(where)} {oct(stat.S_IMODE(p.stat().st_mode))}" for p in files
             if stat.S_IMODE(p.stat().st_mode) & 0o077]
    expect(not loose, expected="every state file mode 0600 (no group/other bits)", actual=loose)
