"""CFG — config and process: runner.json validation, the file mode, the state directory and
its lock, signals and exit codes (protocol §1).

A refused config is observed from outside only: the exit code, the control plane's history (no
request may reach it) and every byte the runner printed (no value of the file echoed).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
import uuid
from collections.abc import Callable
from signal import SIGTERM
from typing import Any

from conformance.marks import case
from conformance.verdict import CaseFailed, expect

from ._helpers_process import (
    bound_lease,
    brief,
    config_values,
    exit_code,
    lan_control_plane,
    mode_of,
    output_holds,
    reap_only,
    same_dir_runner,
    side_runner,
    state_dir,
    world_exchanges,
)

STATUS = {"path": "/api/status", "method": "GET"}


async def refused_at_startup(world: Any, patch: Callable[[dict[str, Any]], None], name: str) -> None:
    """Start the world's (not yet started) runner on a patched runner.json: it must exit 1
    without a request and without echoing a value of the file."""
    runner = world.runner
    patch(runner.config)
    runner.write_config()
    await runner.start()
    code = await exit_code(runner, name)
    stderr = runner.stderr_text().splitlines()[-3:]
    expect(code == 1, expected=f"{name}: exit code 1", actual=f"exit code {code}", witness=stderr)
    sent = world_exchanges(world)
    expect(not sent, expected=f"{name}: no request to the control plane",
           actual=f"{len(sent)} request(s)", witness=[brief(ex) for ex in sent[:5]])
    echoed = output_holds(runner, config_values(runner.config))
    expect(not echoed, expected=f"{name}: no value of the file in the output",
           actual=f"echoed {echoed}", witness=stderr)


@case("CFG-001", start_runner=False)
async def test_mode_0600_runs_and_0644_is_refused(world: Any) -> None:
    """fails when: the runner reads a config that group/others can read (no mode check), or
    exits non-zero / prints the token on SIGTERM after a normal run."""
    runner = world.runner
    path = runner.write_config()
    path.chmod(0o644)
    await runner.start()
    code = await exit_code(runner, "mode 0644")
    err = runner.stderr_text()
    expect(code not in (0, None), expected="mode 0644 → a non-zero exit code", actual=code,
           witness=err.splitlines()[-3:])
    expect("600" in err, expected="a message naming chmod 600", actual=err.strip()[-300:] or "no output")
    sent = world_exchanges(world)
    expect(not sent, expected="mode 0644: no request", actual=f"{len(sent)} request(s)",
           witness=[brief(ex) for ex in sent[:5]])
    path.chmod(0o600)
    await world.start_runner()
    code = await runner.terminate(15)
    expect(code == 0, expected="mode 0600: online, then SIGTERM → exit code 0", actual=code,
           witness=runner.stderr_text().splitlines()[-3:])
    leaked = output_holds(runner, [runner.config["token"]])
    expect(not leaked, expected="no token in the output", actual="the token was printed")


PATCHES: tuple[tuple[str, Callable[[dict[str, Any], Any], None]], ...] = (
    ("HTTP remote serverURL", lambda c, w: c.update(serverURL="http://yaoyao.example.com")),
    ("serverURL with userinfo", lambda c, w: c.update(
        serverURL=w.cp.url.replace("http://", "http://runner:hunter2-hunter2@"))),
    ("serverURL with a path", lambda c, w: c.update(serverURL=w.cp.url + "/api/runner")),
    ("non-loopback hermesURL", lambda c, w: c.update(hermesURL="http://192.0.2.10:9119")),
    ("relative artifact root", lambda c, w: c.update(artifactRoots=["relative/artifacts"])),
    ("../default profile", lambda c, w: c.update(allowedProfiles=["../default"])),
    ("protocol 2", lambda c, w: c.update(protocol=2)),
    ("extra key", lambda c, w: c.update(command="touch /tmp/should-not-run")),
    ("hermesCredentials without username", lambda c, w: c.update(
        hermesCredentials={"password": c["hermesCredentials"]["password"]})),
)


@case("CFG-002", start_runner=False, hermes_auth="account")
async def test_nine_bad_files_are_refused_without_echo(world: Any) -> None:
    """fails when: the runner accepts one of the files (no strict keys, no URL rules, no profile
    or root checks, protocol not pinned to 1), or quotes a value (URL, token, password) in its
    refusal."""
    runners = []
    for name, patch in PATCHES:
        config = json.loads(json.dumps(world.config))
        patch(config, world)
        runners.append((name, side_runner(world, config, name=name)))
    try:
        await asyncio.gather(*(r.start() for _, r in runners))
        codes = await asyncio.gather(*(exit_code(r, name) for name, r in runners))
        for (name, r), code in zip(runners, codes, strict=True):
            stderr = r.stderr_text().splitlines()[-3:]
            expect(code == 1, expected=f"{name}: exit code 1", actual=f"exit code {code}",
                   witness=stderr)
            echoed = output_holds(r, config_values(r.config))
            expect(not echoed, expected=f"{name}: no value of the file in the output",
                   actual=f"echoed {echoed}", witness=stderr)
            leaks = r.leaks()
            expect(not leaks, expected=f"{name}: no secret printed", actual=leaks)
        sent = list(world.cp.history)
        expect(not sent, expected="no request to the control plane", actual=f"{len(sent)}",
               witness=[brief(ex) for ex in sent[:5]])
    finally:
        for _, r in runners:
            await r.close()


@case("CFG-003", start_runner=False, hermes_auth="account")
async def test_lan_opt_in_with_credentials_connects(world: Any) -> None:
    """fails when: the runner refuses http on a non-literal-loopback host although
    allowInsecureLan is true (or refuses hermesCredentials)."""
    creds = {"username": world.hermes.username, "password": world.hermes.password}
    async with lan_control_plane(world, allowInsecureLan=True, hermesCredentials=creds) as lan:
        r = side_runner(world, lan.config, name="LAN runner")
        try:
            await r.start()
            try:
                await r.wait_online(lan.cp, lan.runner_id, 20)
            except Exception as exc:  # noqa: BLE001 - any failure to connect is the verdict
                raise CaseFailed("the LAN opt-in config connects", str(exc),
                                 r.stderr_text().splitlines()[-3:]) from None
            polls = [ex for ex in lan.cp.history
                     if ex.route == "poll" and ex.runner_id == lan.runner_id]
            expect(polls, expected="polls on the LAN control plane", actual="none")
            code = await r.terminate(15)
            expect(code == 0, expected="SIGTERM → exit code 0", actual=code)
            expect(not r.leaks(), expected="no secret printed", actual=r.leaks())
        finally:
            await r.close()


@case("CFG-004", start_runner=False)
async def test_lan_without_opt_in_is_refused(world: Any) -> None:
    """fails when: the runner accepts plain http to a host that is not a literal loopback host
    without allowInsecureLan (e.g. it treats all of 127.0.0.0/8 as local)."""
    async with lan_control_plane(world) as lan:
        r = side_runner(world, lan.config, name="LAN runner")
        try:
            await r.start()
            code = await exit_code(r, "http LAN without allowInsecureLan")
            expect(code == 1, expected="exit code 1", actual=code,
                   witness=r.stderr_text().splitlines()[-3:])
            sent = list(lan.cp.history)
            expect(not sent, expected="no request", actual=f"{len(sent)} request(s)",
                   witness=[brief(ex) for ex in sent[:5]])
            expect(not r.leaks(), expected="no secret printed", actual=r.leaks())
        finally:
            await r.close()


COMPUTERS = {"runtime": "docker", "imageId": "sha256:" + "0" * 64,  # 64 zeros: not configured
             "python": "/opt/hermes/venv/bin/python", "hermesSource": "/opt/hermes/src",
             "hermesHome": "/opt/hermes/home"}


@case("CFG-005", start_runner=False)
async def test_relative_computers_path_refused_absolute_kept(world: Any) -> None:
    """fails when: a relative hermesHome is accepted, or a computers block with absolute paths
    is refused."""
    bad_config = json.loads(json.dumps(world.config))
    bad_config["computers"] = {**COMPUTERS, "hermesHome": "relative/hermes-home"}
    bad = side_runner(world, bad_config, name="relative computers path")
    try:
        await bad.start()
        code = await exit_code(bad, "relative computers path")
        expect(code == 1, expected="a relative hermesHome → exit code 1", actual=code,
               witness=bad.stderr_text().splitlines()[-3:])
        sent = world_exchanges(world)
        expect(not sent, expected="no request", actual=f"{len(sent)} request(s)")
    finally:
        await bad.close()
    world.runner.config["computers"] = dict(COMPUTERS)
    world.runner.write_config()
    try:
        await world.start_runner()
    except Exception as exc:  # noqa: BLE001
        raise CaseFailed("a computers block with absolute paths is accepted and connects",
                         str(exc), world.runner.stderr_text().splitlines()[-3:]) from None


@case("CFG-006", start_runner=False)
async def test_satellite_true_is_refused(world: Any) -> None:
    """fails when: the runner ignores satellite:true."""
    await refused_at_startup(world, lambda c: c.update(satellite=True), "satellite: true")


@case("CFG-007", start_runner=False)
async def test_hermes_localhost_is_refused(world: Any) -> None:
    """fails when: the runner treats hermesURL host localhost as local Hermes."""
    url = world.hermes.url.replace("127.0.0.1", "localhost")
    await refused_at_startup(world, lambda c: c.update(hermesURL=url), "hermesURL on localhost")


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
               witness=second.stderr_text().splitlines()[-3:])
        expect(not second.leaks(), expected="no secret printed", actual=second.leaks())
    finally:
        await reap_only(second)
    others = [ex for ex in world.cp.history.since(mark) if ex.instance not in first]
    expect(not others, expected="no request from the second process",
           actual=f"{len(others)} request(s) of another instance",
           witness=[brief(ex) for ex in others[:5]])
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


@case("CFG-010")
async def test_sigterm_interrupts_running_session_and_exits_0(world: Any) -> None:
    """fails when: SIGTERM exits without session.interrupt of a running turn, or with a
    non-zero code."""
    cp = world.cp
    ch = await cp.open_channel(world.runner_id, profile="default")
    created = await cp.rpc(ch, "session.create", {"profile": "default", "title": "long"})
    expect(created.ok, expected="session.create ok", actual=f"{created.status} {created.code}")
    sid = created.result["session_id"]
    sub = await cp.rpc(ch, "prompt.submit", {"session_id": sid, "text": "HANGTEST"})
    expect(sub.ok, expected="prompt.submit ok", actual=f"{sub.status} {sub.code}")
    await world.hermes.effects.wait_for("prompt.accepted", timeout=10, session_id=sid)
    code = await world.runner.terminate(15)
    interrupts = world.hermes.effects.of("session.interrupted", session_id=sid)
    expect(interrupts, expected=f"session.interrupt of running session {sid}",
           actual="none", witness=[json.dumps(e.to_json(), default=str)
                                   for e in world.hermes.effects.entries[-5:]])
    expect(code == 0, expected="exit code 0", actual=code,
           witness=world.runner.stderr_text().splitlines()[-3:])


#: How long CFG-011 lets a runner that abandons its post at SIGTERM take to exit.
ABANDON_WINDOW = 3.0


@case("CFG-011", manual_clock=True)
async def test_sigterm_lets_an_in_flight_result_post_finish(world: Any) -> None:
    """fails when: SIGTERM aborts the result post of a command that already ran (or exits before
    it is answered)."""
    cp, rid = world.cp, world.runner_id
    command_id = str(uuid.uuid4())
    # targeted: applied once the body is read; on the manual clock it holds until advanced
    cp.faults.delay_next("result", n=1, seconds=5.0, target=command_id)
    handle = await cp.submit(rid, "http", dict(STATUS), command_id=command_id)
    await cp.history.wait_for(lambda ex: ex.route == "result" and ex.command_id == handle.id,
                              timeout=10)
    await cp.poll_held(rid, timeout=10)
    world.runner.signal(SIGTERM)
    await world.runner.guard(cp.poll_released(rid, timeout=10), "its poll was aborted", 10)
    # A runner that abandons its in-flight post at SIGTERM closes that connection and exits on
    # its own, however loaded the machine: give it that chance before the post may be answered
    # (a bounded wait for its exit; a draining runner does not exit, it waits for the answer).
    with contextlib.suppress(TimeoutError):
        await world.runner.wait(ABANDON_WINDOW)
    world.clock.advance(5.0)
    code = await exit_code(world.runner, "SIGTERM with a result post in flight")
    results = [ex for ex in cp.history.filter(route="result") if ex.command_id == handle.id]
    expect(any(ex.status == 200 for ex in results),
           expected="the held result post is answered 200 before the exit",
           actual=[brief(ex) for ex in results])
    expect(handle.done() and handle.outcome is not None and handle.outcome.ok,
           expected="the command ends with its result", actual=handle.outcome)
    expect(code == 0, expected="exit code 0", actual=code)


@case("CFG-012", start_runner=False)
async def test_wrong_token_exits_1_without_retry(world: Any) -> None:
    """fails when: the runner retries after runner_unauthorized (treats it as a transport
    failure) or exits 0."""
    runner = world.runner
    wrong = secrets.token_urlsafe(32)
    world.secrets.add("wrong runner token", wrong)
    runner.secrets.add("wrong runner token", wrong)
    runner.config["token"] = wrong
    runner.write_config()
    await runner.start()
    code = await exit_code(runner, "runner_unauthorized")
    sent = world_exchanges(world)
    expect(code == 1, expected="exit code 1", actual=code, witness=[brief(ex) for ex in sent[:5]])
    expect(len(sent) == 1 and sent[0].code == "runner_unauthorized",
           expected="exactly one poll, answered runner_unauthorized",
           actual=f"{len(sent)} request(s)", witness=[brief(ex) for ex in sent[:5]])


@case("CFG-013")
async def test_state_dir_is_0700(world: Any) -> None:
    """fails when: the state directory is created with the process umask (e.g. 0755)."""
    where = state_dir(world.runner)
    expect(where.is_dir(), expected="the state directory exists", actual="missing")
    expect(mode_of(where) == 0o700, expected="state directory mode 0700",
           actual=oct(mode_of(where)))


@case("CFG-014")
async def test_graceful_stop_prints_stopped(world: Any) -> None:
    """fails when: the runner prints nothing (or something else) at a graceful stop, or writes
    its status lines to stdout."""
    code = await world.runner.terminate(15)
    out, err = world.runner.redacted_output()
    last = [ln for ln in err.splitlines() if ln.strip()][-1:] or [""]
    expect(code == 0, expected="exit code 0", actual=code)
    expect("stopped" in last[0], expected='a last stderr line "<time> stopped"',
           actual=last[0][-200:] or "no stderr")
    expect(out == "", expected="nothing on stdout", actual=out[:200])


@case("CFG-015", start_runner=False, hermes_auth="account")
async def test_credential_bounds_are_refused(world: Any) -> None:
    """fails when: the runner takes a hermesCredentials username over 256 chars or a password
    over 4096 chars (no bounds), or echoes them."""
    long_user = "u" * 257
    long_pass = secrets.token_urlsafe(3100)[:4097]
    world.secrets.add("long Hermes password", long_pass)
    runners = []
    for name, creds in (("username of 257 chars", {"username": long_user, "password": "pw-12345678"}),
                        ("password of 4097 chars", {"username": "hermes", "password": long_pass})):
        config = {**json.loads(json.dumps(world.config)), "hermesCredentials": creds}
        runners.append((name, side_runner(world, config, name=name)))
    try:
        await asyncio.gather(*(r.start() for _, r in runners))
        codes = await asyncio.gather(*(exit_code(r, name) for name, r in runners))
        for (name, r), code in zip(runners, codes, strict=True):
            expect(code == 1, expected=f"{name}: exit code 1", actual=code,
                   witness=r.stderr_text().splitlines()[-3:])
            echoed = output_holds(r, config_values(r.config))
            expect(not echoed, expected=f"{name}: no value echoed", actual=echoed)
        sent = list(world.cp.history)
        expect(not sent, expected="no request", actual=f"{len(sent)} request(s)",
               witness=[brief(ex) for ex in sent[:5]])
    finally:
        for _, r in runners:
            await r.close()


@case("CFG-016", start_runner=False)
async def test_config_that_is_not_json_exits_1(world: Any) -> None:
    """fails when: the runner crashes with another code (a traceback exit 1 is fine, a hang or
    exit 0 is not) or connects with defaults on an unparsable file."""
    runner = world.runner
    path = runner.write_config()
    path.write_text('{"protocol": 1, "token": "' + runner.config["token"] + '", ')  # cut short
    await runner.start()
    code = await exit_code(runner, "a runner.json that is not JSON")
    expect(code == 1, expected="exit code 1", actual=code,
           witness=runner.stderr_text().splitlines()[-3:])
    sent = world_exchanges(world)
    expect(not sent, expected="no request", actual=f"{len(sent)} request(s)")


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


@case("CFG-018")
async def test_sigterm_disposes_leases_with_unbind(world: Any) -> None:
    """fails when: a graceful stop leaves bound leases in the plugin (no unbind)."""
    b = await bound_lease(world)
    code = await world.runner.terminate(15)
    unbinds = world.hermes.effects.of("unbind", session_id=b.session["runtimeId"])
    expect(any(e.detail.get("generation") == b.binding["generation"] for e in unbinds),
           expected="an unbind of the bound lease (its generation) before the exit",
           actual=f"{len(unbinds)} unbind effect(s)")
    expect(code == 0, expected="exit code 0", actual=code)


@case("CFG-019")
async def test_sigterm_closes_every_gateway(world: Any) -> None:
    """fails when: a graceful stop exits with channels' WebSockets still open (left to the
    kernel: an abnormal 1006 close), or closes only some of them."""
    cp = world.cp
    for _ in range(2):
        await cp.open_channel(world.runner_id, profile="default")
    sockets = {e.socket_id for e in world.hermes.effects.of("ws.connected")}
    code = await world.runner.terminate(15)
    # a close frame, not the kernel's reset at exit (aiohttp reports that as 1006)
    closed = {e.socket_id for e in world.hermes.effects.of("ws.closed")
              if e.detail.get("code") not in (None, 1006)}
    expect(len(sockets) >= 2 and sockets <= closed,
           expected=f"every channel socket closed: {sorted(s or '' for s in sockets)}",
           actual=f"closed: {sorted(s or '' for s in closed)}")
    expect(code == 0, expected="exit code 0", actual=code)
