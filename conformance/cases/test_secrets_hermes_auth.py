"""SEC — secrets, the runner's Hermes authentication (§8.1): the session token in memory only,
validated first, fetched again after a refusal, no token mode with userinfo, and no secret in a
child process (rows: conformance/rows/secrets.py; secrets in output: test_secrets_output.py).

Hermes' side is observed through a recording TCP proxy in front of the scripted Hermes (request
lines and whether a request carried the session token) and the effect log. "Hermes restarted
with a new token" is made by swapping the scripted Hermes' token in place.
"""

from __future__ import annotations

import secrets
from typing import Any

from conformance.adapter import RunnerExited
from conformance.marks import case
from conformance.verdict import expect
from conformance.witness import note_line

from ._helpers_channels import (
    HermesProxy,
    _Stoppable,
    effects_of,
    expect_ok,
    new_session,
    outcome_text,
)
from ._helpers_process import side_runner
from ._helpers_wire import http

TOKEN_HEADER = b"x-hermes-session-token:"


class RecordingProxy(HermesProxy):
    """A :class:`HermesProxy` that records each request's first line and whether its headers
    carried the session token (``X-Hermes-Session-Token`` or ``?token=``), never the value."""

    def __init__(self, upstream_port: int, token: str) -> None:
        super().__init__(upstream_port)
        self.token = token.encode()
        self.requests: list[tuple[str, bool]] = []

    async def start(self) -> RecordingProxy:
        await super().start()
        return self

    async def _upstream(self, src: Any, dst: Any) -> None:
        try:
            while data := await src.read(65536):
                head = data.split(b"\r\n\r\n", 1)[0]
                first = head.split(b"\r\n", 1)[0]
                if first.split(b" ", 1)[0] in (b"GET", b"POST", b"PUT", b"DELETE", b"HEAD"):
                    carried = TOKEN_HEADER in head.lower() or b"token=" + self.token in first
                    path = first.split(b" ")[1].split(b"?")[0] if b" " in first else first
                    self.requests.append((f"{first.split(b' ')[0].decode()} {path.decode()}",
                                          carried))
                dst.write(data)
                await dst.drain()
        except OSError:
            pass
        finally:
            try:
                dst.close()
            except Exception:  # noqa: BLE001 - already closed
                pass


async def _behind_recorder(world: Any) -> RecordingProxy:
    proxy = await RecordingProxy(world.hermes.port, world.hermes.session_token).start()
    world._open.insert(0, _Stoppable(proxy))
    world.runner.config["hermesURL"] = proxy.url
    await world.start_runner()
    return proxy


def _new_hermes_token(world: Any) -> str:
    """Hermes restarted with a new session token (``hermes dashboard`` mints one per start)."""
    token = secrets.token_urlsafe(32)
    world.secrets.add("Hermes session token (new)", token)
    object.__setattr__(world.hermes.auth_config, "session_token", token)  # frozen dataclass
    return token


@case("SEC-901")
async def test_session_token_never_on_disk(world: Any) -> None:
    """After an http relay and a channel with a session (both need the token), and a graceful
    stop, no file under the runner's config directory (runner.json, the state directory and
    anything else the runner wrote there) contains the Hermes session token.

    fails when: the runner caches the session token in a file (the instance file, a token
    cache) so a restart can skip the page read."""
    _, out = await http(world, "/api/profiles", profile=None)
    expect(out.ok, expected="GET /api/profiles relayed", actual=outcome_text(out))
    ch = await world.cp.open_channel(world.runner_id)
    await new_session(world, ch)
    await world.runner.stop()
    token = world.hermes.session_token.encode()
    holders = [str(p.relative_to(world.runner.directory))
               for p in sorted(world.runner.directory.rglob("*"))
               if p.is_file() and token in p.read_bytes()]
    expect(not holders, expected="no file holds the Hermes session token", actual=holders)


@case("SEC-902", start_runner=False)
async def test_token_validated_with_profiles_first(world: Any) -> None:
    """Behind a recording proxy: the first request that carries the session token is
    GET /api/profiles (the validation), before any relay or WebSocket uses it.

    fails when: the runner reads the token from the page and uses it straight away (a wrong
    token then fails the first real command instead of the authentication)."""
    proxy = await _behind_recorder(world)
    _, out = await http(world, "/api/config", profile="default")
    expect(out.ok, expected="GET /api/config relayed", actual=outcome_text(out))
    with_token = [line for line, carried in proxy.requests if carried]
    expect(with_token[:1] == ["GET /api/profiles"],
           expected="GET /api/profiles is the first request with the session token",
           actual=with_token[:4] or "no request carried the token",
           witness=[note_line("runner→hermes", f"{line} session-token={'yes' if carried else 'no'}")
                    for line, carried in proxy.requests[:8]])


@case("SEC-903")
async def test_http_401_refetches_the_token(world: Any) -> None:
    """A relay works; Hermes gets a new session token (a restart); the next relay that needs the
    token gets a 401 from Hermes, and the runner fetches the token again and retries: the
    command still succeeds.

    fails when: the runner keeps its first token for the life of the process (every command
    fails after Hermes restarts) or gives up after the 401."""
    _, out = await http(world, "/api/config", profile="default")
    expect(out.ok, expected="GET /api/config relayed", actual=outcome_text(out))
    _new_hermes_token(world)
    _, out = await http(world, "/api/config", profile="default")
    expect(out.ok, expected="GET /api/config relayed after Hermes changed its token",
           actual=outcome_text(out))


@case("SEC-904")
async def test_ws_refusal_authenticates_again(world: Any) -> None:
    """A channel works; Hermes gets a new session token; the next gateway.open's WebSocket is
    refused with the old token, and the runner authenticates again and retries: the channel
    opens and serves a session.

    fails when: the runner reuses its cached token for every WebSocket and answers the open
    with an error."""
    ch = await world.cp.open_channel(world.runner_id)
    await new_session(world, ch)
    _new_hermes_token(world)
    mark = world.hermes.effects.entries[-1].seq
    again = await world.cp.open_channel(world.runner_id, check=False)
    expect_ok(world, again.open_outcome, what="gateway.open after Hermes changed its token",
              needles=[again.connection_id])
    await new_session(world, again)
    expect(effects_of(world, "ws.connected", after_seq=mark),
           expected="a Hermes WebSocket for the new channel", actual="none")


@case("SEC-905", start_runner=False)
async def test_no_token_mode_with_userinfo(world: Any) -> None:
    """A runner.json whose hermesURL carries userinfo (``http://user:pw@127.0.0.1:<port>``):
    the runner either refuses it at start-up with exit code 1 (the reference runner's choice),
    or, if it starts, a relay that needs the session token (GET /api/config) is not answered
    200 from Hermes.

    fails when: the runner strips or ignores the userinfo and authenticates in token mode."""
    config = {**world.config,
              "hermesURL": f"http://hermes:pw-12345678@127.0.0.1:{world.hermes.port}"}
    runner = side_runner(world, config, name="userinfo hermesURL")
    try:
        await runner.start()
        try:
            await runner.wait_online(world.cp, world.runner_id)
        except RunnerExited:
            code = await runner.wait(5.0)
            expect(code == 1, expected="exit code 1 for a hermesURL with userinfo", actual=code)
            return
        _, out = await http(world, "/api/config", profile="default")
        relayed = out.ok and isinstance(out.result, dict) and out.result.get("status") == 200
        expect(not relayed, expected="no token-mode relay through a hermesURL with userinfo",
               actual=outcome_text(out))
    finally:
        await runner.close()


def _descendants(pid: int) -> list[int]:
    """The live descendants of ``pid`` (from /proc; Linux)."""
    from pathlib import Path
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


@case("SEC-906", hermes_auth="account")
async def test_no_secret_in_a_child_process(world: Any) -> None:
    """After an http relay and a channel (account mode: the runner holds the token, the Hermes
    password and a session cookie), every live descendant process of the runner is read from
    /proc: no environment or command line holds one of the world's secrets. A runner that
    starts no child passes.

    fails when: the runner hands its token or the Hermes credentials to a helper process (an
    env var for a plugin, a --token argument), where any local user can read the command line
    and the process's children inherit the environment."""
    from pathlib import Path
    _, out = await http(world, "/api/config", profile="default")
    expect(out.ok, expected="GET /api/config relayed", actual=outcome_text(out))
    ch = await world.cp.open_channel(world.runner_id)
    await new_session(world, ch)
    leaks = []
    for pid in _descendants(world.runner.pid):
        for part in ("environ", "cmdline"):
            try:
                data = (Path("/proc") / str(pid) / part).read_bytes()
            except OSError:
                continue
            names = [name for name, value in world.secrets.items() if value.encode() in data]
            leaks += [f"pid {pid} {part}: {n}" for n in names]
    expect(not leaks, expected="no secret in a child process's environment or command line",
           actual=leaks)
