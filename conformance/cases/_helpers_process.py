"""Helpers of the config-and-process (CFG) and team-tools (TT) cases.

Rules of this module:
- Nothing here knows the runner under test: it drives the world's control plane and scripted
  Hermes, starts extra runner processes through :class:`~conformance.adapter.RunnerUnderTest`,
  and talks to the runner's loopback listener over real sockets with aiohttp, as the Hermes
  plugin does (the URL and lease token come from the plugin's binding, never from the runner).
- Every wait is bounded; nothing sleeps.
- Every secret a helper learns (a lease token, a second runner's token) is added to the world's
  secrets, so transcripts and reports redact it and leak scans look for it.
- Witness lines come from :mod:`conformance.witness` (``lines_of(world, exchanges)`` for the
  exchanges a case holds, ``output_lines`` for a runner's stderr).
"""

from __future__ import annotations

import asyncio
import json
import stat
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from conformance.bounds import scaled
from fake_server import Channel, ControlPlane, Lease, Timings

from ..adapter import RunnerUnderTest
from ..verdict import CaseFailed
from ..witness import lines_of, output_lines

EXIT_TIMEOUT = 15.0
#: an ``http`` payload every Hermes answers at once (its status page)
STATUS = {"path": "/api/status", "method": "GET"}
LAN_HOST = "127.0.0.2"  # loopback on Linux, but not one of the literal loopback hosts of §1.2

#: A catalog with real ids that are easy to spot if they leak to Hermes.
TOOLS: tuple[dict[str, Any], ...] = (
    {"id": "yaoyao_workspace_create_member", "name": "create_member",
     "description": "Create a team member", "inputSchema": {"type": "object"}},
    {"id": "yaoyao_workspace_form_team", "name": "form_team",
     "description": "Form a team", "inputSchema": {"type": "object"}},
)


# -- runner processes --------------------------------------------------------------------------

def world_exchanges(world: Any) -> list[Any]:
    """Every control-plane exchange naming the world's runner."""
    return [ex for ex in world.cp.history if ex.runner_id == world.runner_id]


async def exit_code(runner: RunnerUnderTest, what: str, timeout: float = EXIT_TIMEOUT) -> int:
    """The exit code of the runner's current run; a :class:`CaseFailed` if it keeps running."""
    try:
        return await runner.wait(timeout)
    except TimeoutError:
        await runner.kill()
        raise CaseFailed(f"the runner exits ({what})",
                         f"still running after {timeout}s",
                         output_lines(runner.stderr_text(), last=5)) from None


def output_holds(runner: RunnerUnderTest, values: Sequence[str]) -> list[str]:
    """The ``values`` found in any byte the runner printed (returned as lengths, never text)."""
    out = runner.output()
    return [f"a value of {len(v)} chars" for v in values if v and v.encode() in out]


def config_values(config: Mapping[str, Any], min_len: int = 8) -> list[str]:
    """Every string value of a runner.json (nested too) at least ``min_len`` chars long."""
    found: list[str] = []

    def walk(v: Any) -> None:
        if isinstance(v, str) and len(v) >= min_len:
            found.append(v)
        elif isinstance(v, Mapping):
            for x in v.values():
                walk(x)
        elif isinstance(v, list):
            for x in v:
                walk(x)

    walk(config)
    return found


def side_runner(world: Any, config: Mapping[str, Any], *, name: str) -> RunnerUnderTest:
    """Another runner process with its own directory and ``config`` (secrets scanned)."""
    return RunnerUnderTest(world.runner_cmd, config, secrets=world.secrets, name=name)


def same_dir_runner(world: Any, *, name: str = "second runner") -> RunnerUnderTest:
    """A second adapter on the SAME config file and state directory as ``world.runner``.
    Reap it with :func:`reap_only` (its directory belongs to the first)."""
    first = world.runner
    second = RunnerUnderTest(world.runner_cmd, first.config, secrets=world.secrets, name=name)
    second._dir = first.directory  # noqa: SLF001 - the adapter has no public "share a dir"
    return second


async def reap_only(runner: RunnerUnderTest) -> None:
    for proc in runner.runs:
        await proc.reap()


def state_dir(runner: RunnerUnderTest) -> Path:
    """``<dirname(runner.json)>/state/<runnerId>/`` (protocol §1.4)."""
    return runner.config_path.parent / "state" / str(runner.config["runnerId"])


def mode_of(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


# -- a second control plane on a LAN-like loopback address -------------------------------------

@dataclass
class LanPlane:
    cp: ControlPlane
    runner_id: str
    config: dict[str, Any]

    def exchanges(self) -> list[Any]:
        return list(self.cp.history)


@asynccontextmanager
async def lan_control_plane(world: Any, **config_extra: Any) -> AsyncIterator[LanPlane]:
    """A ControlPlane on ``127.0.0.2`` (loopback, but not a literal loopback host for §1.2), a
    runner registered on it, and its runner.json (pointing at the world's Hermes, with
    ``config_extra``). Never a non-loopback address."""
    cp = ControlPlane(timings=Timings(poll_hold=2.0, redelivery=1.0), host=LAN_HOST,
                      admin_profiles=list(world.profiles))
    await cp.start()
    try:
        reg = await cp.register_runner(name="lan-runner", allowed_profiles=tuple(world.profiles))
        world.secrets.add("LAN runner token", reg.token)
        config = reg.runner_config(hermes_url=world.hermes.url, **config_extra)
        if not str(config.get("serverURL", "")).startswith(f"http://{LAN_HOST}:"):
            raise RuntimeError(f"the LAN control plane is not on {LAN_HOST}")
        yield LanPlane(cp, reg.runner_id, config)
    finally:
        await cp.stop()


# -- team tools ---------------------------------------------------------------------------------

@dataclass
class Bound:
    """A channel, an owned session and a lease, created and (unless asked not to) bound."""

    channel: Channel
    session: dict[str, str]
    lease: Lease
    binding: dict[str, Any] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return str(self.binding["bridge_url"]).rstrip("/")

    @property
    def token(self) -> str:
        return str(self.binding["token"])

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1])


async def owned_session(world: Any, ch: Channel, profile: str = "default") -> dict[str, str]:
    created = await world.cp.rpc(ch, "session.create", {"profile": profile, "title": "tt"})
    if not created.ok:
        raise CaseFailed("session.create through the runner succeeds",
                         f"{created.status} {created.code}", [])
    return {"runtimeId": created.result["session_id"],
            "storedId": created.result["stored_session_id"]}


async def bound_lease(world: Any, *, handlers: Mapping[str, Any] | None = None,
                      tools: Sequence[Mapping[str, Any]] = TOOLS, channel: Channel | None = None,
                      bind: bool = True, profile: str = "default") -> Bound:
    """Open a channel (or use ``channel``), create an owned session, ``lease.create`` and
    ``lease.bind``; the plugin's binding (bridge URL, lease token) is read from the scripted
    Hermes and the token registered as a secret."""
    cp = world.cp
    ch = channel or await cp.open_channel(world.runner_id, profile=profile)
    session = await owned_session(world, ch, profile)
    lease = await cp.create_lease(ch, profile=profile, session=session,
                                  tools=[dict(t) for t in tools],
                                  handlers=dict(handlers or {"*": echo_handler}))
    out = Bound(ch, session, lease)
    if not bind:
        return out
    bound = await cp.bind_lease(lease)
    if not bound.ok:
        raise CaseFailed("lease.bind of a created lease succeeds", f"{bound.status} {bound.code}",
                         [])
    await world.hermes.effects.wait_for("bind", timeout=10, session_id=session["runtimeId"])
    out.binding = dict(world.hermes.bridge.bindings[session["runtimeId"]])
    world.secrets.add("lease token", out.token)
    return out


def echo_handler(tool_id: str, arguments: dict[str, Any]) -> Any:
    return {"tool": tool_id, "arguments": arguments}


@dataclass(frozen=True)
class Answer:
    status: int
    body: Any
    text: str

    def __str__(self) -> str:
        return f"{self.status} {self.text[:300]}"

    @property
    def code(self) -> str | None:
        return self.body.get("code") if isinstance(self.body, dict) else None


#: How often a large-bodied listener probe is sent when the answer came before the body was read.
EARLY_ANSWER_ATTEMPTS = 5


async def listener(b: Bound, path: str, body: Any = None, *, method: str = "POST",
                   token: str | None = "", headers: Mapping[str, str] | None = None,
                   data: bytes | None = None, host: str | None = None) -> Answer:
    """One request to the lease's listener. ``token=""`` means the lease token, ``None`` no
    Authorization header; ``data`` is sent raw (with ``headers``' Content-Type)."""
    hdrs: dict[str, str] = {}
    tok = b.token if token == "" else token
    if tok is not None:
        hdrs["Authorization"] = f"Bearer {tok}"
    payload: bytes | None = data
    if payload is None and method != "GET":
        payload = json.dumps({} if body is None else body).encode()
        hdrs["Content-Type"] = "application/json"
    hdrs.update(headers or {})
    base = b.url if host is None else f"http://{host}:{b.port}"
    # A listener may answer a large body it refuses (415, 413) before reading it and close: the
    # client can then fail writing the rest and never read the answer. Such a probe changes
    # nothing, so it is sent again (bounded) until the answer is read.
    attempts = EARLY_ANSWER_ATTEMPTS if payload is not None and len(payload) > 64 * 1024 else 1
    for attempt in range(1, attempts + 1):
        try:
            async with aiohttp.ClientSession() as http, http.request(
                    method, base + path, data=payload, headers=hdrs,
                    timeout=aiohttp.ClientTimeout(total=15)) as r:
                text = await r.text(errors="replace")
                status = r.status
            break
        except (aiohttp.ClientOSError, aiohttp.ServerDisconnectedError):
            if attempt == attempts:
                raise
    try:
        parsed: Any = json.loads(text) if text else None
    except ValueError:
        parsed = None
    return Answer(status, parsed, text)


async def tool_list(b: Bound) -> list[dict[str, Any]]:
    ans = await listener(b, "/tools/list", {})
    if ans.status != 200 or not isinstance(ans.body, dict) or not isinstance(ans.body.get("tools"), list):
        raise CaseFailed("POST /tools/list answers 200 {tools:[…]}", str(ans), [])
    return list(ans.body["tools"])


async def call(b: Bound, tool_id: str, arguments: Mapping[str, Any], call_id: str) -> Answer:
    return await listener(b, "/tools/call", {"toolId": tool_id, "arguments": dict(arguments),
                                             "callId": call_id})


async def opaque_id(b: Bound, name: str) -> str:
    for t in await tool_list(b):
        if t.get("name") == name:
            return str(t["id"])
    raise CaseFailed(f"tools/list lists the tool named {name}", "it is missing", [])


def tool_relays(world: Any, lease: Lease, call_id: str | None = None) -> list[Any]:
    """The runner's ``tool`` posts for ``lease`` (and ``call_id``)."""
    return [ex for ex in world.cp.history
            if ex.route == "tool" and ex.lease_id == lease.lease_id
            and (call_id is None or ex.call_id == call_id)
            and ex.status is not None]


def relay_lines(world: Any, lease: Lease) -> list[str]:
    """The witness lines of the lease's tool relays (:func:`tool_relays`)."""
    return lines_of(world, tool_relays(world, lease))


async def refuses_connection(host: str, port: int, timeout: float = 5.0) -> bool:
    """True when nothing accepts a TCP connection on ``host:port``."""
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(host, port), scaled(timeout))
    except (OSError, TimeoutError):
        return True
    writer.close()
    try:
        await writer.wait_closed()
    except OSError:
        pass
    return False
