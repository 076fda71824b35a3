"""Probes of the negative controls in negative_controls/controls_spec.py (see nc_probes.py)."""
from __future__ import annotations

import asyncio
from types import SimpleNamespace as NS
from typing import Any

from tests.negative_controls.nc_probes import _yield, probe


async def _noop(*_a: Any, **_k: Any) -> None:
    return None


def _loop_for_shutdown(polls: list[bool]) -> Any:
    async def poll(reset: bool) -> dict[str, Any]:
        polls.append(reset)
        return {"epoch": "e", "commands": []}
    me = NS(machine=NS(poll=poll, close=_noop), hermes=NS(close=_noop), _tasks=set(),
            _connected=True)

    async def disconnect() -> None:
        me._connected = False
    me._disconnect_local = disconnect
    return me


@probe("polls-after-stop")
async def _polls_after_stop() -> bool:
    from runner_ref.poll_loop import PollLoop
    polls: list[bool] = []
    await PollLoop._shutdown(_loop_for_shutdown(polls))  # type: ignore[arg-type]
    return bool(polls)


@probe("runs-commands-admitted-at-stop")
async def _runs_at_stop() -> bool:
    from runner_ref.poll_loop import PollLoop
    me = _loop_for_shutdown([])
    seen: list[bool] = []

    async def pending_command() -> None:   # its admit answer comes in a few loop turns later
        await _yield(3)
        seen.append(me._connected)
    me._tasks.add(asyncio.ensure_future(pending_command()))
    await PollLoop._shutdown(me)  # type: ignore[arg-type]
    return seen == [True]   # executed while the runner still counted itself connected


def _client(sent: list[Any]) -> Any:
    async def request(method: str, route: str, headers: Any, body: Any, timeout: float) -> Any:
        sent.append(headers)
        return {"epoch": "e", "commands": []}
    return NS(_request=request, _poll_headers={True: "reset", False: "plain"})


@probe("reset-on-every-poll")
async def _sticky_reset() -> bool:
    from runner_ref.machine_client import MachineClient
    sent: list[Any] = []
    await MachineClient.poll(_client(sent), False)  # type: ignore[arg-type]
    return sent == ["reset"]


@probe("idle-poll-backoff")
async def _idle_backoff() -> bool:
    from runner_ref.machine_client import MachineClient
    try:
        await asyncio.wait_for(MachineClient.poll(_client([]), False), 0.5)  # type: ignore[arg-type]
    except TimeoutError:
        return True
    return False


@probe("unbounded-close-interrupts")
def _close_bound() -> bool:
    from runner_ref import timings
    return timings.INTERRUPT_WAIT > 10


@probe("running-never-cleared")
def _running_cleared() -> bool:
    from runner_ref import gateway_channel
    return "message.complete" not in gateway_channel.COMPLETION_EVENTS


@probe("event-errors-ignored")
async def _event_errors() -> bool:
    from runner_ref import codes
    from runner_ref.errors import ServerError
    from runner_ref.gateway import Channel
    fatal: list[bool] = []

    async def post_event(body: Any) -> None:
        raise ServerError.of(codes.REQUEST_FAILED, status=500)
    me = NS(_events=asyncio.Queue(), id="c", _registry=NS(
        post_event=post_event, close_later=lambda cid: None, on_fatal=lambda: fatal.append(True)))
    me._events.put_nowait({"connectionId": "c", "frame": {"type": "x"}})
    me._events.put_nowait(None)
    await asyncio.wait_for(Channel._post(me), 2)  # type: ignore[arg-type]
    return not fatal


@probe("inflight-copy-ignored")
def _inflight_copy() -> bool:
    from runner_ref.fingerprint import command_fingerprint
    from runner_ref.poll_loop import PollLoop
    first = {"id": "a", "kind": "http", "payload": {"x": 1}, "expiresAt": 1}
    me = NS(_inflight={"a": (command_fingerprint(first), None)})
    other = {**first, "payload": {"x": 2}}
    return not PollLoop._conflicts_in_flight(me, other)  # type: ignore[arg-type]


@probe("short-lease-token")
def _short_token() -> bool:
    from runner_ref.teamtools.listener import LoopbackListener
    listener = LoopbackListener(tools=[], relay=None, is_active=lambda: True)  # type: ignore[arg-type]
    return len(listener.token) < 43


@probe("bind-ignores-native-tools")
async def _native_tools() -> bool:
    from runner_ref.hermes import HermesClient

    async def request(method: str, path: str, **_: Any) -> Any:
        return 200, {}, b'{"ok":true,"native_tools":false}'
    _, reply = await HermesClient.post_json(NS(request=request),  # type: ignore[arg-type]
                                            "/api/plugins/yaoyao-bot-bridge/bind", {})
    return reply.get("native_tools") is True


def _page_client(seen: list[str]) -> Any:
    async def _raw(method: str, path: str, **_: Any) -> Any:
        seen.append(f"{method} {path}")
        if path == "/":
            return 200, {}, b'<script>window.__HERMES_SESSION_TOKEN__="' + b"t" * 40 + b'";</script>'
        return 200, {}, b"[]"
    return NS(_raw=_raw, _token=None, _account_mode=True)


@probe("session-token-cached-on-disk")
async def _token_cached() -> bool:
    import os
    import tempfile

    from runner_ref.hermes import HermesClient
    here = os.getcwd()
    with tempfile.TemporaryDirectory() as tmp:
        os.chdir(tmp)
        try:
            await HermesClient._read_page_token(_page_client([]))  # type: ignore[arg-type]
            return bool(os.listdir(tmp))
        finally:
            os.chdir(here)


@probe("unvalidated-session-token")
async def _unvalidated() -> bool:
    from runner_ref.hermes import HermesClient
    seen: list[str] = []
    await HermesClient._read_page_token(_page_client(seen))  # type: ignore[arg-type]
    return "GET /api/profiles" not in seen


@probe("hermes-url-userinfo-accepted")
def _userinfo() -> bool:
    from tests.negative_controls.nc_probes import _accepts
    return _accepts(hermesURL="http://u:p@127.0.0.1:9119")


@probe("ledger-failure-executes")
async def _claim_errors() -> bool:
    from runner_ref.ledger_store import LedgerStore

    async def _submit(*_a: Any) -> Any:
        raise RuntimeError("database is locked")
    try:
        await LedgerStore.claim(NS(_submit=_submit), "c", "f", 0)  # type: ignore[arg-type]
    except RuntimeError:
        return False
    return True


@probe("no-tombstone-on-disconnect")
async def _disconnect_tombstones() -> bool:
    from runner_ref.gateway import Gateways
    stones: list[str] = []
    me = NS(channels={"a": NS(id="a")}, _tombstone=stones.append, _close_tracked=_noop,
            _background=set())
    await Gateways.close_all(me)  # type: ignore[arg-type]
    return not stones


@probe("follows-redirects")
def _follows() -> bool:
    from runner_ref.machine_client import MachineClient
    me = NS(_session=NS(closed=False, request=lambda *a, **k: k))
    sent: Any = MachineClient._http(me).request(  # type: ignore[arg-type]
        "GET", "x", allow_redirects=False)
    return sent["allow_redirects"] is True


@probe("acts-on-error-text")
async def _error_text() -> bool:
    from runner_ref.errors import ServerError
    from runner_ref.machine_client import MachineClient
    body = b'{"error":"runner_unauthorized: revoked","code":"runner_instance_changed"}'

    async def read() -> bytes:
        return body

    class _Answer:
        async def __aenter__(self) -> Any:
            return NS(status=403, content_length=len(body), content=NS(read=read))

        async def __aexit__(self, *exc: object) -> bool:
            return False
    me = NS(_http=lambda: NS(request=lambda *a, **k: _Answer()), _base="",
            _timeout=lambda t: None)
    try:
        await MachineClient._request(me, "GET", "poll", {}, None, 1.0)  # type: ignore[arg-type]
    except ServerError as exc:
        return exc.code == "runner_unauthorized"
    return False


@probe("missing-deadline-runs")
def _missing_deadline() -> bool:
    from runner_ref import poll_loop
    return bool(poll_loop.deadline_ok(None, 0)) or bool(poll_loop.deadline_ok("soon", 0))


@probe("token-in-child-env")
async def _child_env() -> bool:
    from runner_ref.poll_loop import PollLoop

    async def retire(*_a: Any) -> None:
        return None
    me = NS(cfg=NS(token="t" * 40), store=NS(retire=retire), _helper=None)
    await PollLoop._retire_now(me)  # type: ignore[arg-type]
    helper = me._helper
    if helper is None:
        return False
    helper.kill()
    helper.wait()
    return True


@probe("computer-status-relayed")
def _computer_status() -> bool:
    from runner_ref import http_kind
    from runner_ref.errors import CommandError
    try:
        http_kind.plan_http({"path": "/api/status", "method": "GET", "computer": {"id": "vm"}},
                            ("default",), ())
    except CommandError:
        return False
    return True


# -- controls_spec2.py: the lease re-check (§6.5) ---------------------------------------------

async def _renew_probe(*, owned: bool = True, bind_fails: bool = False) -> Any:
    """Run LeaseManager._renew on a bound lease due for its re-check at t = 300 (expiry 1800)."""
    from runner_ref.teamtools.leases import LeaseManager
    seen = NS(binds=0, disposed=False)
    lease = NS(next_renew=300.0, expires_at=1800.0, bound=True)

    async def _bind(_lease: Any) -> None:
        seen.binds += 1
        if bind_fails:
            raise RuntimeError("bind refused")

    async def _dispose(_lease: Any) -> None:
        seen.disposed = True

    me = NS(renew_every=300.0, ttl=1800.0, _owned=lambda _l: owned, _bind=_bind,
            _dispose=_dispose)
    await LeaseManager._renew(me, lease, 300.0)  # type: ignore[arg-type]
    seen.expires_at = lease.expires_at
    return seen


@probe("no-lease-recheck")
async def _no_recheck() -> bool:
    return (await _renew_probe()).binds == 0


@probe("recheck-keeps-expiry")
async def _keeps_expiry() -> bool:
    return bool((await _renew_probe()).expires_at < 2100.0)


@probe("failed-rebind-kept")
async def _rebind_kept() -> bool:
    return not (await _renew_probe(bind_fails=True)).disposed


@probe("uncapped-error-text")
def _uncapped_error_text() -> bool:
    from runner_ref import codes
    return len(codes.error_result("hermes_rpc_error", "x" * 5000)["error"]["message"]) > 1000


@probe("active-list-missing-is-empty")
async def _active_list_missing() -> bool:
    from runner_ref.gateway import Gateways

    async def call(_method: str, _params: Any) -> Any:
        return {}
    ch = NS(sessions={"s1": "default"}, call=call)
    try:
        params = {"profile": "default", "current_session_id": "s1"}
        out = await Gateways._active_list(NS(), ch, params)  # type: ignore[arg-type]
    except Exception:
        return False
    return out == {"sessions": []}


@probe("lease-stored-id-stale")
def _stored_id_stale() -> bool:
    from runner_ref.teamtools.leases import LeaseManager, State
    lease = NS(runtime_id="r1", state=State.ACTIVE, stored_id="old")
    LeaseManager.on_session_info(NS(_leases={"l1": lease}), "r1", "new")  # type: ignore[arg-type]
    return lease.stored_id == "old"
