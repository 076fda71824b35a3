"""SEC — secrets in output (the Hermes authentication cases: test_secrets_hermes_auth.py): the runner token, the Hermes password, session token, cookies, tickets and the
lease (bridge) tokens never leave where they belong.

Secrets minted while the case runs (the Hermes session cookie, ws tickets, bridge tokens) are
added to the world's registry before any scan, so the plugin's own scan and every redaction
know them too.
"""

from __future__ import annotations

import json
from typing import Any

from conformance.marks import case
from conformance.verdict import expect
from conformance.witness import output_lines, witness
from fixtures.hermes.script import Script

from ._helpers_wire import TIMEOUT, describe, http, open_session, refused_with

TEAM_TOOLS = [{"id": "yaoyao_workspace_create_member", "name": "create_member",
               "description": "Create a team member", "inputSchema": {"type": "object"}},
              {"id": "yaoyao_workspace_form_team", "name": "form_team",
               "description": "Form a team", "inputSchema": {"type": "object"}}]


def refresh_secrets(world: Any) -> dict[str, str]:
    """Add every secret the scripted Hermes minted so far (cookies, tickets, bridge tokens) to
    the world's registry; returns them by name."""
    found: dict[str, str] = {}
    extra = getattr(world.hermes, "secrets", ())
    for i, value in enumerate(sorted(v for v in extra if isinstance(v, str))):
        found[f"Hermes secret {i}"] = value
    for sid, binding in getattr(world.hermes.bridge, "bindings", {}).items():
        if isinstance(binding, dict) and isinstance(binding.get("token"), str):
            found[f"bridge token of {sid}"] = binding["token"]
    for name, value in found.items():
        world.secrets.add(name, value)
    return found


def _to_control_plane(world: Any, secrets: dict[str, str]) -> list[str]:
    """Where one of ``secrets`` occurs in what the runner sent to the control plane (request
    bodies of every route) — the control plane's answers are not the runner's doing."""
    where = []
    for ex in world.cp.history:
        if ex.runner_id != world.runner_id:
            continue
        blob = json.dumps(ex.request_body, default=str)
        where += [f"#{ex.seq} {ex.route} request carries the {name}"
                  for name, value in secrets.items() if value and value in blob]
    return where


async def _work(world: Any, *, errors: bool = False) -> None:
    """Ordinary work through the runner: relays, a session and a prompt; with ``errors``,
    refusals and Hermes errors too."""
    (world.artifact_root / "s.txt").write_text("sec\n")
    for path, file in (("/api/status", None), ("/api/config", None),
                       ("/api/files/download", str(world.artifact_root / "s.txt"))):
        _, out = await http(world, path, profile=None if path == "/api/status" else "default",
                            file=file)
        expect(out.ok, expected=f"GET {path} relayed", actual=describe(out))
    ch, sid = await open_session(world)
    out = await world.cp.rpc(ch, "prompt.submit", {"session_id": sid, "text": "hello"})
    expect(out.ok, expected="prompt.submit relayed", actual=describe(out))
    await ch.next_event(type="message.complete", timeout=TIMEOUT)
    if errors:
        _, out = await http(world, "/api/config", method="POST")
        expect(refused_with(out, ["runner_http_forbidden"]), expected="POST refused",
               actual=describe(out))
        _, out = await http(world, "/api/files/download", file="/etc/hostname")
        expect(not out.ok, expected="download outside the roots refused", actual=describe(out))
        out = await world.cp.rpc(ch, "session.steer", {"session_id": sid})  # Hermes 4002
        expect(not out.ok, expected="a Hermes JSON-RPC error comes back as an error",
               actual=describe(out))
        out = await world.cp.rpc(ch, "no.such.method", {}, as_sent=True)  # an error on purpose
        expect(not out.ok, expected="an unknown method refused", actual=describe(out))


def _runner_leaks(world: Any) -> list[str]:
    return [str(leak) for leak in world.runner.leaks()] if world.runner is not None else []


@case("SEC-001", hermes_script="plain", hermes_auth="account")
async def test_no_secret_in_output_over_a_run_with_errors(world):
    """fails when: the runner prints its token, the Hermes password or the Hermes session cookie
    (e.g. the config on a parse error, the login body, a request with headers on failure)."""
    await _work(world, errors=True)
    world.cp.faults.fail_next("poll", status=503, code="service_updating")
    seen = world.cp.history.last_seq
    await world.cp.history.wait_for(
        lambda ex: ex.route == "poll" and ex.reset and ex.runner_id == world.runner_id,
        timeout=TIMEOUT, after_seq=seen)
    handle, out = await http(world, "/api/status", profile=None)
    expect(out.ok, expected="the runner works after a failed poll", actual=describe(out))
    await world.restart_runner()
    _, out = await http(world, "/api/config")
    expect(out.ok, expected="the restarted runner relays", actual=describe(out))
    refresh_secrets(world)
    rc = await world.runner.stop()
    leaks = _runner_leaks(world)
    expect(not leaks, expected="no secret in any byte of the runner's stdout/stderr (all runs)",
           actual=leaks[:6] or f"none (exit {rc})",
           witness=output_lines(world.runner.redacted_output()[1], last=6))


BAD_PATCHES: tuple[tuple[str, dict[str, Any]], ...] = (
    ("protocol 2", {"protocol": 2}),
    ("an unknown key", {"surprise": True}),
    ("a non-string token", {"token": 12345}),
)


@case("SEC-002", hermes_auth="account", start_runner=False)
async def test_refused_config_never_echoes_credentials(world):
    """fails when: a refused runner.json is echoed in the error (the whole config, the offending
    object or the credentials), e.g. ``invalid config: {...token...}``."""
    runner = world.runner
    good = dict(runner.config)
    for what, patch in BAD_PATCHES:
        runner.config = {**good, **patch}
        runner.write_config()
        await runner.start()
        rc = await runner.wait(TIMEOUT)
        expect(rc != 0, expected=f"a config with {what} is refused (non-zero exit)",
               actual=f"exit {rc}")
        leaks = _runner_leaks(world)
        expect(not leaks, expected=f"no token or password in the output refusing {what}",
               actual=leaks[:4], witness=output_lines(runner.redacted_output()[1], last=4))


@case("SEC-003", hermes_script="plain", hermes_auth="account")
async def test_hermes_password_never_reaches_the_control_plane(world):
    """Work with errors, then the Hermes account's password is changed (every cookie void), so
    the runner's next login with its configured password is refused; the relays after that are
    answered somehow, and nothing the runner sent holds a secret.

    fails when: the Hermes password, session cookie or a ws ticket appears in anything the
    runner sends to the control plane (e.g. a relayed set-cookie header, an error message
    quoting the refused login request)."""
    await _work(world, errors=True)
    configured = world.hermes.password
    world.hermes.change_password()
    mark = world.hermes.effects.entries[-1].seq if world.hermes.effects.entries else 0
    for path in ("/api/config", "/api/status"):
        _, out = await http(world, path, profile=None if path == "/api/status" else "default")
        expect(out is not None, expected=f"GET {path} answered after the password changed",
               actual=describe(out))
    refused = [e for e in world.hermes.effects.of("auth.rejected", after_seq=mark)
               if e.detail.get("reason") == "bad_credentials"]
    secrets = {"Hermes password": configured, **refresh_secrets(world)}
    found = _to_control_plane(world, secrets)
    expect(not found, expected="no Hermes password / cookie / ticket in any request to the "
                               "control plane (" + (f"{len(refused)} refused login(s)"
                                                    if refused else "no login refused") + ")",
           actual=found[:6], witness=witness(world, last=6))
    relayed = [ex for ex in world.cp.history.filter(route="result")
               if isinstance(ex.request_body, dict) and isinstance(ex.request_body.get("result"), dict)
               and any(k.lower() == "set-cookie"
                       for k in (ex.request_body["result"].get("headers") or {}))]
    expect(not relayed, expected="no set-cookie header relayed",
           actual=[ex.seq for ex in relayed], witness=witness(world, last=4))


@case("SEC-004", hermes_script=Script.bundled("plain", http_set_cookie=True))
async def test_hermes_session_token_never_reaches_the_control_plane(world):
    """Every answer of a Hermes GET /api/* route carries a Set-Cookie with a fresh secret
    (``http_set_cookie``); the relays must pass on neither the header nor the cookie.

    fails when: the Hermes session token or a Hermes cookie appears in a request to the control
    plane, e.g. a relayed ``set-cookie`` header (a relay passing every header), an error message
    quoting the Hermes URL with ``?token=``."""
    await _work(world, errors=True)
    secrets = {"Hermes session token": world.hermes.session_token, **refresh_secrets(world)}
    cookies = [name for name, value in secrets.items() if value in world.hermes.core.minted]
    found = _to_control_plane(world, secrets)
    expect(cookies and not found,
           expected="no Hermes session token or cookie in any request to the control plane "
                    f"({len(cookies)} Set-Cookie answers relayed through the runner)",
           actual=found[:6], witness=witness(world, last=6))
    relayed = [ex.seq for ex in world.cp.history.filter(route="result")
               if isinstance(ex.request_body, dict)
               and isinstance(ex.request_body.get("result"), dict)
               and any(str(k).lower() == "set-cookie"
                       for k in (ex.request_body["result"].get("headers") or {}))]
    expect(not relayed, expected="no set-cookie header relayed (protocol 3.1)",
           actual=f"result posts with set-cookie: {relayed}", witness=witness(world, last=4))


@case("SEC-005", hermes_script="team")
async def test_lease_token_never_reaches_the_control_plane(world):
    """fails when: the lease's bridge token (what Hermes' plugin presents to the runner's
    listener) appears in a request to the control plane: the lease.create/bind result, a tool
    relay, an event."""
    calls: list[str] = []

    def handler(tool_id: str, arguments: dict[str, Any]) -> Any:
        calls.append(tool_id)
        return {"ok": True}

    ch = await world.cp.open_channel(world.runner_id, profile="default")
    made = await world.cp.rpc(ch, "session.create", {"profile": "default", "cols": 100})
    expect(made.ok, expected="session.create relayed", actual=describe(made))
    sid, stored = made.result["session_id"], made.result["stored_session_id"]
    lease = await world.cp.create_lease(ch, profile="default", tools=TEAM_TOOLS,
                                        handlers={"*": handler},
                                        session={"runtimeId": sid, "storedId": stored})
    bound = await world.cp.bind_lease(lease)
    expect(bound.ok, expected="lease.bind succeeds", actual=describe(bound))
    out = await world.cp.rpc(ch, "prompt.submit", {"session_id": sid, "text": "TEAMTEST"})
    expect(out.ok, expected="prompt.submit relayed", actual=describe(out))
    await ch.next_event(type="message.complete", timeout=TIMEOUT)
    secrets = refresh_secrets(world)
    tokens = {k: v for k, v in secrets.items() if k.startswith("bridge token")}
    expect(tokens and calls, expected="a bound lease and relayed tool calls",
           actual=f"{len(tokens)} bridge token(s), {len(calls)} tool call(s)")
    found = _to_control_plane(world, secrets)
    expect(not found, expected="no bridge token in any request to the control plane",
           actual=found[:6], witness=witness(world, lease.lease_id, last=6))


@case("SEC-006", hermes_script="plain", hermes_auth="account")
async def test_account_mode_logs_in_and_relays(world):
    """fails when: with hermesCredentials the runner does not log in with the password route, or
    relays without the session cookie (401 no_cookie), or opens a WebSocket without a fresh
    ticket."""
    _, out = await http(world, "/api/config")
    expect(out.ok and isinstance(out.result, dict) and out.result.get("status") == 200,
           expected="GET /api/config relayed with the session cookie (200)", actual=describe(out),
           witness=witness(world, last=6))
    logins = world.hermes.effects.of("auth.login")
    expect(logins and logins[0].cause is not None
           and logins[0].cause.path in ("/auth/password-login", "/api/auth/login"),
           expected="an auth.login through POST /auth/password-login",
           actual=[(e.cause.path if e.cause else None) for e in logins])
    ch, sid = await open_session(world)
    connected = world.hermes.effects.of("ws.connected")
    queries = [str(e.cause.query) if e.cause else "" for e in connected]
    expect(connected and all("ticket" in q for q in queries),
           expected="every Hermes WebSocket opened with ?ticket=", actual=queries)
    rejected = world.hermes.effects.of("auth.rejected") + world.hermes.effects.of("ws.rejected")
    expect(not rejected, expected="no request or socket rejected by Hermes",
           actual=[(e.kind, e.detail) for e in rejected][:4])
    out = await world.cp.rpc(ch, "prompt.submit", {"session_id": sid, "text": "hi"})
    expect(out.ok, expected="prompt.submit relayed in account mode", actual=describe(out))
    refresh_secrets(world)
