"""One in-process probe per positive control: True when the contrary choice is observable.

Each probe drives the patched seam's call site (fakes for its collaborators) and answers whether
the behaviour is the control's, not the reference runner's. The reference runner must answer
False, the patched one True (``test_probes.py``): a positive control that changes nothing
would prove nothing. Probes never depend on the conformance cases.
"""
from __future__ import annotations

import asyncio
import contextlib
import io
import json
import tempfile
import uuid
from collections.abc import Callable
from types import SimpleNamespace as NS
from typing import Any

from tests.negative_controls.nc_probes import prober

PROBES: dict[str, Callable[[], bool]] = {}


probe = prober(PROBES)


def _config(**extra: Any) -> dict[str, Any]:
    return {"protocol": 1, "serverURL": "http://127.0.0.1:1", "runnerId": str(uuid.uuid4()),
            "token": "t" * 40, "allowedProfiles": ["default"], **extra}


def _accepts(**extra: Any) -> bool:
    from runner_ref import config
    try:
        config.parse_config(_config(**extra))
    except config.ConfigError:
        return False
    return True


def _code_of(fn: Callable[[], Any]) -> str:
    from runner_ref.errors import CommandError
    try:
        fn()
    except CommandError as exc:
        return exc.code
    return ""


async def _acode_of(coro: Any) -> str:
    from runner_ref.errors import CommandError
    try:
        await coro
    except CommandError as exc:
        return exc.code
    return ""


# -- config, command line, state directory, output ---------------------------------------------
probe("accepts-empty-credentials")(
    lambda: _accepts(hermesCredentials={"username": "", "password": ""}))
probe("refuses-upper-case-runner-id")(lambda: not _accepts(runnerId=str(uuid.uuid4()).upper()))
probe("bounds-url-length")(lambda: not _accepts(hermesURL="http://127.0.0.1:9119/" + "a" * 3000))
probe("accepts-ipv4-shorthand")(lambda: _accepts(hermesURL="http://127.1:9119"))
probe("refuses-hermes-url-path")(lambda: not _accepts(hermesURL="http://127.0.0.1:9119/hermes"))


@probe("config-two-args-only")
def _two_args() -> bool:
    import runner_ref.__main__ as m
    return m.parse_args(["--config=/etc/runner.json"]) is None \
        and m.parse_args(["--config", "/etc/runner.json"]) == "/etc/runner.json"


def _state_dir() -> Any:
    from runner_ref.statedir import StateDir
    return StateDir(tempfile.mkdtemp(prefix="pcprobe-"), str(uuid.uuid4()))


@probe("other-version-string")
def _version() -> bool:
    import os
    sd = _state_dir()
    sd.acquire()
    try:
        with open(os.path.join(sd.path, "service-instance.json"), encoding="utf-8") as f:
            return json.load(f)["version"] != "1.0.0"
    finally:
        sd.release()


@probe("other-ledger-file")
def _ledger_file() -> bool:
    return not _state_dir().ledger_path.endswith("/runner-commands.sqlite3")


def _loop_fake(code: int) -> Any:
    async def nothing(*_a: Any) -> None:
        return None

    async def poll_loop() -> int:
        return code

    async def watch() -> None:
        await asyncio.sleep(3600)
    return NS(_watch_stop=watch, _retire_now=nothing, _poll_loop=poll_loop, _shutdown=nothing)


@probe("prints-stopped-after-unauthorized")
async def _stopped() -> bool:
    from runner_ref.poll_loop import PollLoop
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        assert await PollLoop.run(_loop_fake(1)) == 1  # type: ignore[arg-type]
    return "stopped" in err.getvalue()


@probe("repeats-status-lines")
def _repeats() -> bool:
    from runner_ref.poll_loop import PollLoop
    me = NS(_last_status=None)
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        PollLoop._status(me, "service_unavailable")  # type: ignore[arg-type]
        PollLoop._status(me, "service_unavailable")  # type: ignore[arg-type]
    return len(err.getvalue().splitlines()) == 2


@probe("upstream-features")
def _features() -> bool:
    from runner_ref import poll_loop  # imported by name there: the rebind reaches it
    return "managed-browser-disabled-v1" not in poll_loop.features_header(True).split(",")


# -- command kinds -----------------------------------------------------------------------------
def _plan(**payload: Any) -> str:
    from runner_ref import http_plan
    return _code_of(lambda: http_plan.plan_http({"method": "GET", **payload}, ("default",), ()))


@probe("refuses-missing-profile")
def _no_profile() -> bool:
    return _plan(path="/api/config", search="") == "runner_profile_forbidden"


@probe("extension-kind-unknown")
async def _extension() -> bool:
    from runner_ref.poll_loop import PollLoop
    me = NS(kinds={}, _connected=True, machine=NS(epoch="e"))
    reply = await PollLoop.execute(me, "browser.invoke", {}, "e")  # type: ignore[arg-type]
    return reply["error"]["code"] == "runner_command_unknown"


@probe("search-query-form-only")
def _search() -> bool:
    return _plan(path="/api/config", search="profile=default") == "runner_error"


@probe("computer-target-feature-code")
def _computer() -> bool:
    return _plan(path="/api/status", computer={"id": "vm1"}) == "runner_feature_unavailable"


@probe("relays-content-type-only")
async def _headers() -> bool:
    from runner_ref.http_kind import run_http

    async def request(method: str, path: str, params: Any = None) -> Any:
        return 200, {"content-type": "text/plain", "etag": '"1"'}, b"ok"
    hermes: Any = NS(request=request)
    out = await run_http({"method": "GET", "path": "/api/status"}, hermes, ("default",), ())
    return "etag" not in out["headers"]


@probe("too-large-other-code")
async def _too_large() -> bool:
    from aiohttp import web

    from runner_ref.hermes import HermesClient
    async def big(_request: web.Request) -> web.Response:
        return web.Response(body=b"x" * 64)
    app = web.Application()
    app.router.add_get("/big", big)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    client = HermesClient(f"http://127.0.0.1:{port}", None)
    try:
        code = await _acode_of(client._raw("GET", "/big", cap=8, auth=False))
    finally:
        await client.close()
        await runner.cleanup()
    return code not in ("", "hermes_response_too_large")


@probe("hermes-unavailable-other-code")
async def _unavailable() -> bool:
    from runner_ref.hermes import HermesClient
    client = HermesClient("http://127.0.0.1:1", None)
    try:
        code = await _acode_of(client._raw("GET", "/api/status", auth=False))
    finally:
        await client.close()
    return code not in ("", "hermes_unavailable")


@probe("hermes-auth-other-code")
def _auth() -> bool:
    from runner_ref import hermes
    return hermes._auth_failed().code != "hermes_auth_failed"


@probe("strict-connection-id")
async def _connection_id() -> bool:
    from runner_ref.errors import CommandError
    from runner_ref.gateway import Gateways
    me = NS(is_tombstoned=lambda cid: True)   # a well-formed id then stops at the tombstone
    try:
        await Gateways.open(me, {"connectionId": "conn-1"})  # type: ignore[arg-type]
    except CommandError as exc:
        return "malformed" in exc.message
    return False


@probe("active-list-profile-checked")
async def _active_list() -> bool:
    from runner_ref.gateway import Gateways

    async def call(method: str, params: Any) -> Any:
        return {"sessions": [{"id": "s1", "status": "idle"}]}
    ch = NS(sessions={"s1": object()}, call=call)
    me = NS(allowed_profiles=("default",))
    params = {"profile": "other", "current_session_id": "s1"}
    return await _acode_of(Gateways._active_list(me, ch, params)) == "runner_profile_forbidden"  # type: ignore[arg-type]


@probe("hermes-wait-at-the-edge")
async def _hermes_wait() -> bool:
    from runner_ref.hermes import HermesClient
    client = HermesClient("http://127.0.0.1:1", None)
    try:
        return client._http().timeout.total != 25.0
    finally:
        await client.close()


@probe("rpc-error-other-code")
async def _rpc_error() -> bool:
    from runner_ref.gateway_channel import Channel
    fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
    me = NS(_pending={1: fut}, _on_result={})
    Channel._on_frame(me, {"id": 1, "error": {"code": -1, "message": "no"}})  # type: ignore[arg-type]
    return await _acode_of(fut) not in ("", "hermes_rpc_error")


@probe("missing-deadline-runner-error")
async def _missing_deadline() -> bool:
    from runner_ref import timings
    from runner_ref.ledger import Gate, deadline_ok
    from runner_ref.poll_loop import PollLoop

    async def deadline(cmd: Any, epoch: str) -> bool:
        return deadline_ok(cmd.get("expiresAt"), timings.now_ms())

    async def admit(cmd: Any, epoch: str) -> bool:
        return True

    async def execute(kind: Any, payload: Any, epoch: str) -> Any:
        return {"result": "ran"}
    me = NS(gate_checks={Gate.DEADLINE: deadline, Gate.ADMIT: admit}, execute=execute)
    reply = await PollLoop._admit_and_execute(me, {"id": "a", "kind": "http"}, "e")  # type: ignore[arg-type]
    return reply.get("error", {}).get("code") == "runner_error"
