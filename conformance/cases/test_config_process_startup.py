"""CFG — config and process, at startup: runner.json's file mode and validation, the LAN opt-in,
credential bounds and a wrong token; a refused config ends the runner with exit code 1 (§1.1–1.3,
§1.5).

A refused config is observed from outside only: the exit code, the control plane's history (no
request may reach it) and every byte the runner printed (no value of the file echoed).
"""

from __future__ import annotations

import asyncio
import json
import re
import secrets
from collections.abc import Callable
from typing import Any

from conformance.marks import case
from conformance.process import Process, scrubbed_env
from conformance.verdict import CaseFailed, expect
from conformance.witness import lines_of, output_lines

from ._helpers_process import (
    EXIT_TIMEOUT,
    config_values,
    exit_code,
    lan_control_plane,
    output_holds,
    side_runner,
    world_exchanges,
)


async def refused_at_startup(world: Any, patch: Callable[[dict[str, Any]], None], name: str) -> None:
    """Start the world's (not yet started) runner on a patched runner.json: it must exit 1
    without a request and without echoing a value of the file."""
    runner = world.runner
    patch(runner.config)
    runner.write_config()
    await runner.start()
    code = await exit_code(runner, name)
    stderr = output_lines(runner.stderr_text(), last=3)
    expect(code == 1, expected=f"{name}: exit code 1", actual=f"exit code {code}", witness=stderr)
    sent = world_exchanges(world)
    expect(not sent, expected=f"{name}: no request to the control plane",
           actual=f"{len(sent)} request(s)", witness=lines_of(world, sent[:5]))
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
           witness=lines_of(world, sent[:5]))
    path.chmod(0o600)
    await world.start_runner()
    code = await runner.terminate(15)
    expect(code == 0, expected="mode 0600: online, then SIGTERM → exit code 0", actual=code,
           witness=output_lines(runner.stderr_text(), last=3))
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
            stderr = output_lines(r.stderr_text(), last=3)
            expect(code == 1, expected=f"{name}: exit code 1", actual=f"exit code {code}",
                   witness=stderr)
            echoed = output_holds(r, config_values(r.config))
            expect(not echoed, expected=f"{name}: no value of the file in the output",
                   actual=f"echoed {echoed}", witness=stderr)
            leaks = r.leaks()
            expect(not leaks, expected=f"{name}: no secret printed", actual=leaks)
        sent = list(world.cp.history)
        expect(not sent, expected="no request to the control plane", actual=f"{len(sent)}",
               witness=lines_of(world, sent[:5]))
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
                                 output_lines(r.stderr_text(), last=3)) from None
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
                   witness=output_lines(r.stderr_text(), last=3))
            sent = list(lan.cp.history)
            expect(not sent, expected="no request", actual=f"{len(sent)} request(s)",
                   witness=lines_of(world, sent[:5]))
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
               witness=output_lines(bad.stderr_text(), last=3))
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
                         str(exc), output_lines(world.runner.stderr_text(), last=3)) from None


@case("CFG-006", start_runner=False)
async def test_satellite_true_is_refused(world: Any) -> None:
    """fails when: the runner ignores satellite:true."""
    await refused_at_startup(world, lambda c: c.update(satellite=True), "satellite: true")


@case("CFG-007", start_runner=False)
async def test_hermes_localhost_is_refused(world: Any) -> None:
    """fails when: the runner treats hermesURL host localhost as local Hermes."""
    url = world.hermes.url.replace("127.0.0.1", "localhost")
    await refused_at_startup(world, lambda c: c.update(hermesURL=url), "hermesURL on localhost")


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
    expect(code == 1, expected="exit code 1", actual=code, witness=lines_of(world, sent[:5]))
    expect(len(sent) == 1 and sent[0].code == "runner_unauthorized",
           expected="exactly one poll, answered runner_unauthorized",
           actual=f"{len(sent)} request(s)", witness=lines_of(world, sent[:5]))


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
                   witness=output_lines(r.stderr_text(), last=3))
            echoed = output_holds(r, config_values(r.config))
            expect(not echoed, expected=f"{name}: no value echoed", actual=echoed)
        sent = list(world.cp.history)
        expect(not sent, expected="no request", actual=f"{len(sent)} request(s)",
               witness=lines_of(world, sent[:5]))
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
           witness=output_lines(runner.stderr_text(), last=3))
    sent = world_exchanges(world)
    expect(not sent, expected="no request", actual=f"{len(sent)} request(s)")


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
           witness=output_lines("\n".join(proc.tail(5)), redact=runner.secrets.redact, last=5))


ISO_LINE = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})? \S")


@case("CFG-906")
async def test_status_lines_are_time_stamped(world: Any) -> None:
    """After a connection and a graceful stop, every non-empty stderr line starts with an
    ISO-8601 time and a space.

    fails when: the runner prints bare texts ("connected", "stopped"), another time format, or
    multi-line output (a traceback) on stderr."""
    code = await world.runner.terminate(15)
    _, err = world.runner.redacted_output()
    lines = [ln for ln in err.splitlines() if ln.strip()]
    bad = [ln[:160] for ln in lines if not ISO_LINE.match(ln)]
    expect(lines and not bad, expected="every stderr line '<ISO-8601 time> <text>'",
           actual=bad[:5] or "no stderr at all")
    expect(code == 0, expected="exit code 0", actual=code)
