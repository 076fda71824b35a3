"""HRM — Hermes interop: what a runner must do with Hermes' real behaviour (§3.1, §3.3, §3.4, §6,
§8.3), written so that it runs unchanged against the scripted Hermes (the default) and against a
REAL Hermes Agent 0.19.0 (``--hermes real[:PATH]``: ``conformance.real_world``).

These cases use no pause point and no effect log as evidence of the runner's behaviour: they
observe the control plane's history, the events on the channels and the command results; where
one must look inside Hermes (which socket closed, was the plugin unbound) it asks the
``Side`` of ``_helpers_hermes_interop``. Each is marked ``@any_hermes``, so ``--hermes real``
keeps it (every other case is not-applicable there).
"""

from __future__ import annotations

import base64
import json
from typing import Any

import aiohttp

from conformance.marks import any_hermes, case
from conformance.verdict import CaseFailed, expect
from conformance.witness import frame_lines, lines_of, note_line

from ._helpers_hermes_interop import (
    DANGER,
    OPTIONS,
    PROFILE,
    SLOW_TEXT,
    TIMINGS,
    TOOL_MARK,
    TOOLS,
    hermes_sockets,
    open_session,
    poll_until,
    session_events,
    side,
    submit,
    turn,
    wait_event,
)


async def _direct(world: Any, path: str) -> Any:
    """``GET path`` straight from Hermes (not through the runner), for comparison."""
    async with aiohttp.ClientSession() as http, http.get(
            world.hermes.url + path,
            headers={"X-Hermes-Session-Token": world.hermes.session_token}) as resp:
        return await resp.json()


def _relayed_json(out: Any, path: str) -> Any:
    expect(out.ok and isinstance(out.result, dict) and out.result.get("status") == 200,
           expected=f"http GET {path} → {{status: 200, headers, body}}", actual=out)
    expect(isinstance(out.result.get("headers"), dict | list),
           expected=f"{path}: the relayed result has headers", actual=sorted(out.result))
    try:
        return json.loads(base64.b64decode(out.result["body"], validate=True))
    except (KeyError, TypeError, ValueError) as exc:
        raise CaseFailed(f"{path}: body is base64 of Hermes' JSON",
                         f"{type(exc).__name__}: {str(out.result.get('body'))[:120]!r}") from None


@any_hermes
@case("HRM-001", **OPTIONS)
async def test_http_reads_status_and_profiles(world: Any) -> None:
    """fails when: the runner does not relay the status or headers, does not base64 the body, or
    rewrites Hermes' JSON (keys added or dropped), or loses the default profile."""
    status = _relayed_json(await world.cp.command(
        world.runner_id, "http", {"path": "/api/status", "method": "GET"}), "/api/status")
    direct = await _direct(world, "/api/status")
    expect(isinstance(status, dict) and sorted(status) == sorted(direct),
           expected=f"/api/status with Hermes' own keys {sorted(direct)}",
           actual=sorted(status) if isinstance(status, dict) else status)
    expect(status.get("version") == direct.get("version") and status.get("auth_required") is False,
           expected=f"version {direct.get('version')}, auth_required false",
           actual={k: status.get(k) for k in ("version", "auth_required")})
    profiles = _relayed_json(await world.cp.command(
        world.runner_id, "http", {"path": "/api/profiles", "method": "GET"}), "/api/profiles")
    items = profiles.get("profiles") if isinstance(profiles, dict) else profiles
    names = [p.get("name") if isinstance(p, dict) else p for p in items or []]
    expect(names == [PROFILE], expected=f"/api/profiles lists [{PROFILE!r}]", actual=names)


@any_hermes
@case("HRM-002", **OPTIONS)
async def test_streamed_turn_reaches_the_owning_channel_in_order(world: Any) -> None:
    """fails when: deltas are dropped, reordered or posted after message.complete, a frame is
    changed, or the session's events are posted on another channel (broadcast)."""
    ch = await world.cp.open_channel(world.runner_id, profile=PROFILE)
    other = await world.cp.open_channel(world.runner_id, profile=PROFILE)
    sid, _ = await open_session(world, ch, "stream")
    done, mark = await turn(world, ch, sid, "PING please")
    evs = session_events(ch, sid, mark)
    types = [e.get("type") for e in evs]
    witness = frame_lines(evs)
    expect(done["payload"].get("status") == "complete", expected="message.complete status complete",
           actual=done["payload"], witness=witness)
    end = types.index("message.complete")
    deltas = [i for i, t in enumerate(types) if t == "message.delta"]
    expect(deltas and max(deltas) < end, expected="message.delta events, all before message.complete",
           actual=types, witness=witness)
    expect("message.start" in types and types.index("message.start") < deltas[0],
           expected="message.start before the first delta", actual=types, witness=witness)
    text = "".join(str(evs[i]["payload"].get("text", "")) for i in deltas)
    final = str(done["payload"].get("text") or "")
    expect("PONG-42" in text and text.strip() == final.strip(),
           expected=f"deltas that add up to the completed text {final!r}", actual=repr(text),
           witness=witness)
    leaked = [e.get("type") for e in other.events if e.get("session_id") == sid]
    expect(not leaked, expected="no event of the session on another channel",
           actual=f"{len(leaked)} on the other channel: {leaked[:6]}")
    expect((await world.cp.close_channel(other)).ok and (await world.cp.close_channel(ch)).ok,
           expected="gateway.close ok", actual="a close failed")


@any_hermes
@case("HRM-003", **OPTIONS)
async def test_tool_turn_reaches_the_channel(world: Any) -> None:
    """fails when: tool.start / tool.complete frames are dropped or reordered, or the tool's
    result is cut from tool.complete."""
    ch = await world.cp.open_channel(world.runner_id, profile=PROFILE)
    sid, _ = await open_session(world, ch, "tool")
    done, mark = await turn(world, ch, sid, "TOOLTEST")
    evs = session_events(ch, sid, mark)
    types, witness = [e.get("type") for e in evs], frame_lines(evs)
    expect(done["payload"].get("status") == "complete"
           and "Tool done." in str(done["payload"].get("text")),
           expected="the turn completes with 'Tool done.'", actual=done["payload"], witness=witness)
    expect("tool.start" in types and "tool.complete" in types
           and types.index("tool.start") < types.index("tool.complete")
           < types.index("message.complete"),
           expected="tool.start, then tool.complete, then message.complete", actual=types,
           witness=witness)
    complete = evs[types.index("tool.complete")]["payload"]
    expect(complete.get("name") == "terminal" and TOOL_MARK in json.dumps(complete.get("result")),
           expected=f"tool.complete of terminal with {TOOL_MARK!r} in its result",
           actual=json.dumps(complete)[:300], witness=witness)
    expect((await world.cp.close_channel(ch)).ok, expected="gateway.close ok", actual="failed")


@any_hermes
@case("HRM-004", **OPTIONS)
async def test_approval_respond_completes_the_turn(world: Any) -> None:
    """fails when: approval.request is not forwarded, approval.respond is refused or not sent to
    Hermes (the turn never ends), or its result is changed."""
    ch = await world.cp.open_channel(world.runner_id, profile=PROFILE)
    sid, _ = await open_session(world, ch, "approval")
    mark = await submit(world, ch, sid, "DANGERTEST")
    asked, _ = await wait_event(ch, "approval.request", sid, mark)
    expect(asked["payload"].get("command") == DANGER and "once" in (asked["payload"].get("choices")
                                                                     or []),
           expected=f"approval.request for {DANGER!r} offering 'once'", actual=asked["payload"])
    answered = await world.cp.rpc(ch, "approval.respond", {"session_id": sid, "choice": "once"})
    expect(answered.ok and answered.result == {"resolved": 1},
           expected="approval.respond → {resolved: 1}", actual=answered)
    done, _ = await wait_event(ch, "message.complete", sid, mark)
    types = [e.get("type") for e in session_events(ch, sid, mark)]
    expect(done["payload"].get("status") == "complete" and "tool.complete" in types,
           expected="the tool runs and the turn completes", actual=types,
           witness=frame_lines(session_events(ch, sid, mark)))
    expect((await world.cp.close_channel(ch)).ok, expected="gateway.close ok", actual="failed")


@any_hermes
@case("HRM-005", **OPTIONS)
async def test_interrupt_ends_the_turn_interrupted(world: Any) -> None:
    """fails when: session.interrupt is not sent to Hermes (the turn streams to its end), or its
    result is changed, or the interrupted message.complete is not forwarded."""
    ch = await world.cp.open_channel(world.runner_id, profile=PROFILE)
    sid, _ = await open_session(world, ch, "interrupt")
    mark = await submit(world, ch, sid, "SLOWTEST")
    await wait_event(ch, "message.delta", sid, mark)
    stopped = await world.cp.rpc(ch, "session.interrupt", {"session_id": sid})
    expect(stopped.ok and isinstance(stopped.result, dict)
           and stopped.result.get("status") == "interrupted",
           expected="session.interrupt → {status: interrupted}", actual=stopped)
    done, _ = await wait_event(ch, "message.complete", sid, mark)
    text = str(done["payload"].get("text") or "")
    expect(done["payload"].get("status") == "interrupted" and len(text) < len(SLOW_TEXT.strip()),
           expected="message.complete status interrupted, before the full text",
           actual={"status": done["payload"].get("status"), "chars": len(text)},
           witness=frame_lines(session_events(ch, sid, mark))[-6:])
    closed = await world.cp.rpc(ch, "session.close", {"session_id": sid})
    expect(closed.ok and closed.result == {"closed": True},
           expected="session.close → {closed: true}", actual=closed)
    expect((await world.cp.close_channel(ch)).ok, expected="gateway.close ok", actual="failed")


@any_hermes
@case("HRM-006", **OPTIONS)
async def test_gateway_close_closes_only_its_socket(world: Any) -> None:
    """fails when: gateway.close leaves the Hermes socket open, answers other than {ok:true}, or
    closes the sockets of other channels too."""
    ch = await world.cp.open_channel(world.runner_id, profile=PROFILE)
    keep = await world.cp.open_channel(world.runner_id, profile=PROFILE)
    sid, _ = await open_session(world, ch, "closing")
    kept, _ = await open_session(world, keep, "kept")
    await turn(world, ch, sid, "PING first")
    before = hermes_sockets(world)
    was_open = {peer for peer, why in before.items() if why is None}
    expect(len(was_open) >= 2, expected="a Hermes socket per open channel (2)",
           actual=f"{len(was_open)} open: {before}")
    out = await world.cp.close_channel(ch)
    expect(out.ok and out.result == {"ok": True}, expected="gateway.close → {ok: true}", actual=out)

    def closed_now() -> set[str]:
        return {p for p in was_open if hermes_sockets(world).get(p) is not None}

    await poll_until(lambda: bool(closed_now()), 10.0, "Hermes sees the channel's socket close")
    done, _ = await turn(world, keep, kept, "PING still here")
    expect(done["payload"].get("status") == "complete",
           expected="the other channel still streams a turn", actual=done["payload"])
    after = hermes_sockets(world)
    still = {p for p in was_open if after.get(p) is None}
    expect(still, expected="the other channel's socket still open",
           actual=f"every socket closed: {after}")
    expect((await world.cp.close_channel(keep)).ok, expected="gateway.close ok", actual="failed")


@any_hermes
@case("HRM-007", **OPTIONS)
async def test_team_tool_call_round_trip_and_lease_close(world: Any) -> None:
    """fails when: lease.bind does not bind the plugin, a model tool call is not relayed to the
    tool route (or its result not returned), or lease.close leaves the tools with the session
    (a call after it still executes)."""
    executed: list[tuple[str, dict[str, Any]]] = []

    def handler(tool_id: str, arguments: dict[str, Any]) -> dict[str, Any]:
        executed.append((tool_id, arguments))
        return {"ok": True, "receipt": f"receipt-{len(executed)}"}

    ch = await world.cp.open_channel(world.runner_id, profile=PROFILE)
    sid, stored = await open_session(world, ch, "team")
    lease = await world.cp.create_lease(ch, profile=PROFILE, tools=TOOLS, handlers={"*": handler},
                                        session={"runtimeId": sid, "storedId": stored})
    bound = await world.cp.bind_lease(lease)
    expect(bound.ok, expected="lease.bind through the plugin succeeds", actual=bound)
    relays0 = len(world.cp.history.filter(route="tool"))
    done, mark = await turn(world, ch, sid, "TEAMTEST")
    evs = session_events(ch, sid, mark)
    relays = world.cp.history.filter(route="tool")[relays0:]
    witness = lines_of(world, relays) + frame_lines(evs)
    expect(done["payload"].get("status") == "complete"
           and "Team is ready." in str(done["payload"].get("text")),
           expected="the team turn completes", actual=done["payload"], witness=witness)
    expect([t for t, _ in executed] == ["ws.create_member", "ws.form_team"]
           and executed[0][1] == {"name": "Ada", "role": "reviewer"},
           expected="create_member(Ada) then form_team executed by the control plane",
           actual=executed, witness=witness)
    expect(len(relays) == 2 and all(ex.status == 200 for ex in relays) and lease.executions == 2,
           expected="two tool relays answered 200", actual=[ex.status for ex in relays],
           witness=witness)
    results = json.dumps([e["payload"].get("result") for e in evs if e.get("type") == "tool.complete"])
    expect("receipt-1" in results and "receipt-2" in results,
           expected="each tool.complete carries the control plane's result",
           actual=results[:400], witness=witness)

    closed = await world.cp.close_lease(lease)
    expect(closed.ok, expected="lease.close ok", actual=closed)
    hermes = side(world)

    async def unbound() -> bool:
        return int(await hermes.unbinds()) >= 1

    await poll_until(unbound, 10.0, "lease.close unbinds the plugin")
    done2, mark2 = await turn(world, ch, sid, "TEAMTEST again")
    later = world.cp.history.filter(route="tool")[relays0 + 2:]
    expect(done2["payload"].get("status") == "complete" and not later and len(executed) == 2,
           expected="after lease.close the model's calls execute nothing",
           actual=f"{len(later)} more relays, {len(executed)} executions",
           witness=frame_lines(session_events(ch, sid, mark2)))
    expect((await world.cp.close_channel(ch)).ok, expected="gateway.close ok", actual="failed")


def _acceptance_options() -> dict[str, Any]:
    from conformance.acceptance.scenario import model_server_script, scripted_hermes_script

    return {"hermes_script": scripted_hermes_script(), "model_script": model_server_script(),
            "timings": TIMINGS}


@any_hermes
@case("HRM-008", **_acceptance_options())
async def test_team_acceptance_scenario(world: Any) -> None:
    """fails when: any rule of the issue-12 acceptance breaks through this runner — a hop loses
    or adds a tool call, two administrators' tools cross, a repeated request id executes twice,
    the report misses the originating session, or a revoked grant still executes."""
    from conformance.acceptance import checks
    from conformance.acceptance.drive import run_scenario
    from conformance.acceptance.scenario import ADMINS

    for name in ADMINS:
        await world.cp.create_account(name, allowed_profiles=[PROFILE])
    hermes = side(world)
    run = await run_scenario(world.cp, world.runner_id, hermes, timeout=120.0)
    witness = [note_line("harness", ln) for ln in checks.report(run, hermes).splitlines()]
    rules = (("tool calls agree at every hop", lambda: checks.hops_agree(run)),
             ("lifecycle ends with a report into the originating session",
              lambda: checks.lifecycle_and_report_back(run, hermes)),
             ("a repeated request id creates nothing twice",
              lambda: checks.repeated_request_id_creates_nothing_twice(run)),
             ("two administrators at once, no cross-talk",
              lambda: checks.two_administrators_without_cross_talk(run)),
             ("revocation mid-flight stops the tools",
              lambda: checks.revocation_stops_the_tools(run)))
    for what, check in rules:
        try:
            check()
        except AssertionError as exc:
            raise CaseFailed(what, str(exc)[:600] or "assertion failed", witness) from None
