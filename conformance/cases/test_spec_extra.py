"""Cases for sentences of docs/protocol.md that no family case tests (IDs 900–999).

The runner is a black box: these cases look only at what it leaves on disk, its exit code and
its output, through the world's runner adapter.
"""

from __future__ import annotations

from typing import Any

from conformance.marks import case
from conformance.process import Process, scrubbed_env
from conformance.verdict import expect

from ._helpers_process import bound_lease

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


# -- http refusals of a core runner (§3.1) -------------------------------------------------------

TIMEOUT = 15.0


def _last_seq(world: Any) -> int:
    entries = world.hermes.effects.entries
    return max(world.cp.history.last_seq, entries[-1].seq if entries else 0)


def _effects_after(world: Any, seq: int) -> list[str]:
    return [f"#{e.seq} {e.kind}" for e in world.hermes.effects.entries if e.seq > seq]


def _brief(out: Any) -> str:
    if out.ok:
        return f"200 result {str(out.result)[:160]}"
    return f"{out.status} {out.code} ({(out.message or '')[:120]})"


async def _http(world: Any, payload: dict[str, Any]) -> Any:
    handle = await world.cp.submit(world.runner_id, "http", payload, profile="default")
    return await handle.wait(TIMEOUT)


@case("LIM-901")
async def test_core_runner_refuses_memory_extract(world: Any) -> None:
    """fails when: a core runner (no computers) forwards POST …/memory-extract to Hermes, or
    refuses it with another code than memory_extraction_unavailable (e.g. runner_http_forbidden
    because rule 4 ran before rule 1)."""
    since = _last_seq(world)
    out = await _http(world, {"path": "/api/plugins/yaoyao-bot-bridge/memory-extract",
                              "method": "POST", "search": "?profile=default",
                              "body": {"profile": "default", "prompt": "remember"}})
    expect(not out.ok and out.code == "memory_extraction_unavailable",
           expected="an error result memory_extraction_unavailable", actual=_brief(out))
    expect(not _effects_after(world, since), expected="no Hermes effect for memory-extract",
           actual=_effects_after(world, since))


@case("PERM-901")
async def test_core_runner_refuses_a_computer_target(world: Any) -> None:
    """fails when: a core runner (no computers) ignores the `computer` target of an http
    command and relays the request to its local Hermes (a GET of /api/status, of session
    messages or a download with a computer target reaches Hermes or answers 200).

    The paths of rules 3 and 3b, and /api/status (allowlisted, no profile check): §3.1 says
    every request with a computer target is refused, whatever its code."""
    target = {"id": "vm-1"}
    for path, search in (("/api/files/download", "?profile=default&path=%2Ftmp%2Fx"),
                         ("/api/sessions/s1/messages", "?profile=default"),
                         ("/api/status", "")):
        since = _last_seq(world)
        out = await _http(world, {"path": path, "method": "GET", "search": search,
                                  "computer": target})
        expect(not out.ok, expected=f"GET {path} with a computer target refused",
               actual=_brief(out))
        expect(not _effects_after(world, since),
               expected=f"no Hermes effect for GET {path} with a computer target",
               actual=_effects_after(world, since))


# -- gateway.open ids (§3.2) ---------------------------------------------------------------------

@case("LIM-902")
async def test_open_accepts_any_uuid_and_refuses_an_open_id(world: Any) -> None:
    """A gateway.open with a lower-case UUID that is not a version-4 one opens; a second
    gateway.open of the same, still open, connectionId is refused with a plain error
    (runner_error) and connects no second Hermes socket.

    fails when: the runner accepts only v4 UUIDs (or validates the version nibble), or opens a
    second socket / replaces the channel for an id that is already open, or refuses it with a
    specific code instead of runner_error."""
    import uuid

    cid = str(uuid.uuid1())  # lower case, version 1
    ch = await world.cp.open_channel(world.runner_id, profile="default", connection_id=cid,
                                     check=False)
    expect(ch.open_outcome is None or ch.open_outcome.ok,
           expected=f"gateway.open of the version-1 UUID {cid} opens",
           actual=_brief(ch.open_outcome) if ch.open_outcome else "no outcome")
    since = _last_seq(world)
    again = await world.cp.open_channel(world.runner_id, profile="default", connection_id=cid,
                                        check=False)
    out = again.open_outcome
    expect(out is not None and not out.ok and out.code == "runner_error",
           expected="a second gateway.open of an open id refused with runner_error",
           actual=_brief(out) if out else "no outcome (opened)")
    new = [e for e in _effects_after(world, since) if "ws.connected" in e]
    expect(not new, expected="no second Hermes socket for an id that is already open",
           actual=new)


# -- lease.create applies requireProfile (§3.5) ---------------------------------------------------

@case("TT-901", hermes_script="team")
async def test_lease_create_outside_allowed_profiles_is_refused(world: Any) -> None:
    """lease.create naming a profile outside allowedProfiles ("research") for an owned session
    must be refused (runner_profile_forbidden; runner_session_forbidden accepted, since the
    session is not owned under that profile either) and start no listener, no bind.

    fails when: the runner skips requireProfile for lease.create and the session-under-profile
    check, creating a lease (listener) for a profile it may not serve."""
    ch = await world.cp.open_channel(world.runner_id, profile="default")
    created = await world.cp.rpc(ch, "session.create", {"profile": "default", "title": "tt"})
    expect(created.ok, expected="session.create ok", actual=_brief(created))
    session = {"runtimeId": created.result["session_id"],
               "storedId": created.result["stored_session_id"]}
    since = _last_seq(world)
    lease = await world.cp.create_lease(ch, profile="research", session=session, check=False)
    out = lease.create_outcome
    expect(out is not None and not out.ok
           and out.code in ("runner_profile_forbidden", "runner_session_forbidden"),
           expected="lease.create for profile research refused runner_profile_forbidden",
           actual=_brief(out) if out else "no outcome")
    expect(not _effects_after(world, since), expected="no Hermes effect (no bind)",
           actual=_effects_after(world, since))


# -- gateway.close disposes the channel's leases (§3.4) --------------------------------------------

@case("TT-902", hermes_script="team")
async def test_gateway_close_disposes_the_channels_leases(world: Any) -> None:
    """A bound lease lives on a channel; gateway.close of that channel must dispose it: the
    plugin gets the unbind of the lease's generation, and a later lease.bind of it is refused.

    fails when: gateway.close closes the Hermes socket but leaves the channel's leases alive
    (no unbind, the listener keeps serving, lease.bind still works)."""
    b = await bound_lease(world)
    sid = b.session["runtimeId"]
    closed = await world.cp.close_channel(b.channel)
    expect(closed.ok, expected="gateway.close answered {ok:true}", actual=_brief(closed))
    unbind = await world.hermes.effects.wait_for("unbind", timeout=TIMEOUT, session_id=sid)
    expect(unbind.detail.get("generation") == b.binding["generation"],
           expected="the unbind of the bound lease's generation",
           actual=str(unbind.detail.get("generation")))
