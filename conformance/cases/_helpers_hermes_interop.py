"""Shared parts of the HRM cases: one script, written twice (the scripted Hermes' JSON script and
the real Hermes' scripted model), and helpers that observe only what both Hermes show.

What both show: the control plane's history, the events on a channel, the results of commands.
Where a case must look inside Hermes, it goes through :class:`Side`: the scripted Hermes' effect
log, or (real) Hermes' own log and our plugin's counters; never a pause point.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from conformance.verdict import CaseFailed, expect
from conformance.witness import frame_lines
from fake_server import Channel, Timings
from fixtures.real_hermes import Call, Rule, Say, Script

PROFILE = "default"
#: A real Hermes answers in seconds: no redelivery while a command is in flight.
TIMINGS = Timings(poll_hold=2.0, redelivery=5.0, watchdog_tick=0.5, offline_after=10.0)
TURN_TIMEOUT = 120.0  # a real Hermes builds an agent on its first turn: slow on a busy machine
DANGER = "rm -rf /tmp/hrm-conformance-nonexistent-dir-xyz"
TOOL_MARK = "tool-ran-42"
SLOW_TEXT = "word " * 400

# -- the script, twice ------------------------------------------------------------------------
SCRIPTED: dict[str, Any] = {"version": 1, "description": "HRM cases", "rules": [
    {"name": "ping", "match": {"prefix": "PING"}, "steps": [
        {"say": "Hello from the fake model."}, {"say": " PONG-42"}]},
    {"name": "tool", "match": {"prefix": "TOOLTEST"}, "steps": [
        {"tool": "terminal", "args": {"command": f"echo {TOOL_MARK}"},
         "result": {"output": TOOL_MARK, "exit_code": 0, "error": None}},
        {"say": "Tool done."}]},
    {"name": "danger", "match": {"prefix": "DANGERTEST"}, "steps": [
        {"tool": "terminal", "args": {"command": DANGER},
         "approval": {"pattern_key": "delete in root path", "description": "delete in root path"},
         "result": {"output": "", "exit_code": 0, "error": None}},
        {"say": "Cleaned up."}]},
    {"name": "slow", "match": {"prefix": "SLOWTEST"}, "steps": [
        {"stream": ["word ", "word ", "word "]}, {"wait": "interrupt"}, {"say": SLOW_TEXT}]},
    {"name": "team", "match": {"prefix": "TEAMTEST"}, "steps": [
        {"team_tool": "create_member", "arguments": {"name": "Ada", "role": "reviewer"}},
        {"team_tool": "form_team", "arguments": {"members": ["Ada"]}},
        {"say": "Team is ready."}]},
]}
MODEL = Script(rules=(
    Rule("PING", (Say("Hello from the fake model. PONG-42", chunks=4),)),
    Rule("TOOLTEST", (Call("terminal", {"command": f"echo {TOOL_MARK}"}), Say("Tool done."))),
    Rule("DANGERTEST", (Call("terminal", {"command": DANGER}), Say("Cleaned up."))),
    Rule("SLOWTEST", (Say(SLOW_TEXT, chunks=200, delay=0.05),)),
    Rule("TEAMTEST", (Call("create_member", {"name": "Ada", "role": "reviewer"}),
                      Call("form_team", {"members": ["Ada"]}), Say("Team is ready."))),
))
#: The world options of every HRM case (the scripted Hermes ignores ``model_script``).
OPTIONS: dict[str, Any] = {"hermes_script": SCRIPTED, "model_script": MODEL, "timings": TIMINGS}

TOOLS = [
    {"id": "ws.create_member", "name": "create_member", "description": "Create a member",
     "inputSchema": {"type": "object", "properties": {"name": {"type": "string"},
                                                      "role": {"type": "string"}}}},
    {"id": "ws.form_team", "name": "form_team", "description": "Form a team",
     "inputSchema": {"type": "object", "properties": {"members": {"type": "array"}}}},
]


# -- what differs between the two Hermes --------------------------------------------------------
def is_real(world: Any) -> bool:
    return hasattr(world, "model")


def side(world: Any) -> Any:
    """The acceptance scenario's ``HermesSide`` for this world's Hermes."""
    if is_real(world):
        return world.side()
    from conformance.acceptance.sides import ScriptedSide

    return ScriptedSide(world.hermes)


def session_params(world: Any) -> dict[str, Any]:
    return dict(world.session_params()) if is_real(world) else {}


def hermes_sockets(world: Any) -> dict[str, str | None]:
    """Every ``/api/ws`` socket Hermes accepted → why it closed (None while open)."""
    if is_real(world):
        return dict(world.hermes_sockets())
    out: dict[str, str | None] = {}
    for e in world.hermes.effects.entries:
        if e.kind == "ws.connected":
            out[str(e.socket_id)] = None
        elif e.kind == "ws.closed":
            out[str(e.socket_id)] = f"code={e.detail.get('code')}"
    return out


# -- waiting and reading -----------------------------------------------------------------------
async def poll_until(check: Callable[[], Awaitable[bool] | bool], timeout: float,
                     what: str) -> None:
    """A bounded poll (Hermes' own log has no event to await)."""
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while True:
        got = check()
        if await got if isinstance(got, Awaitable) else got:
            return
        if loop.time() > end:
            raise CaseFailed(what, f"not within {timeout:.0f} s")
        await asyncio.sleep(0.05)  # the poll interval of a bounded poll, not a wait


def session_events(ch: Channel, sid: str, after: int = 0) -> list[dict[str, Any]]:
    return [e for e in ch.events[after:] if e.get("session_id") == sid]


async def wait_event(ch: Channel, type_: str, sid: str, after: int,
                     timeout: float = TURN_TIMEOUT) -> tuple[dict[str, Any], int]:
    """The first event ``type_`` of session ``sid`` at index >= ``after`` (and its index)."""
    loop = asyncio.get_running_loop()
    end, i = loop.time() + timeout, after
    while True:
        try:
            ev = await ch.next_event(type_, timeout=max(0.1, end - loop.time()), after=i)
        except TimeoutError:
            raise CaseFailed(f"a {type_} event of session {sid} on the channel",
                             f"none within {timeout:.0f} s",
                             frame_lines(session_events(ch, sid, after)[-12:])) from None
        idx = next(k for k in range(i, len(ch.events)) if ch.events[k] is ev)
        if ev.get("session_id") == sid:
            return ev, idx
        i = idx + 1


async def open_session(world: Any, ch: Channel, title: str) -> tuple[str, str]:
    made = await world.cp.rpc(ch, "session.create", {"profile": PROFILE, "title": title,
                                                     "cols": 100, **session_params(world)})
    expect(made.ok, expected="session.create through the runner succeeds", actual=made)
    return str(made.result["session_id"]), str(made.result["stored_session_id"])


async def submit(world: Any, ch: Channel, sid: str, text: str) -> int:
    """``prompt.submit`` (answered ``{status: streaming}``); the channel's event index before it."""
    mark = len(ch.events)
    sent = await world.cp.rpc(ch, "prompt.submit", {"session_id": sid, "text": text})
    expect(sent.ok and sent.result == {"status": "streaming"},
           expected="prompt.submit answered {status: streaming}", actual=sent)
    return mark


async def turn(world: Any, ch: Channel, sid: str, text: str) -> tuple[dict[str, Any], int]:
    """Submit ``text`` and await the turn's ``message.complete``: (that event, mark)."""
    mark = await submit(world, ch, sid, text)
    done, _ = await wait_event(ch, "message.complete", sid, mark)
    return done, mark
