"""Probes of the wire controls (admission, the machine client, the poll loop):
``negative_controls/controls_wire.py`` (see ``nc_probes.py``)."""
from __future__ import annotations

import asyncio
import contextlib
import io
from types import SimpleNamespace as NS
from typing import Any

from tests.negative_controls.nc_probes import _client, _poll_client, _yield, probe


async def _admit_refused_gate() -> bool:
    from runner_ref.poll_loop import PollLoop

    async def post(route: str, body: Any, epoch: str | None = None) -> Any:
        return {"allowed": False}
    me = NS(machine=NS(post=post))
    return await PollLoop._admit_gate(me, {"id": "a"}, "e")  # type: ignore[arg-type]


probe("skip-admit")(_admit_refused_gate)


probe("ignore-admit-false")(_admit_refused_gate)


@probe("admit-in-parallel")
async def _admit_parallel() -> bool:
    from runner_ref.ledger import Gate
    from runner_ref.poll_loop import PollLoop
    grant = asyncio.Event()
    ran: list[str] = []

    async def deadline(cmd: Any, epoch: str) -> bool:
        return True

    async def admit(cmd: Any, epoch: str) -> bool:
        await grant.wait()
        return False

    async def execute(kind: Any, payload: Any, epoch: str) -> Any:
        ran.append(kind)
        return {"result": 1}
    me = NS(gate_checks={Gate.DEADLINE: deadline, Gate.ADMIT: admit}, execute=execute)
    task = asyncio.ensure_future(PollLoop._admit_and_execute(me, {"kind": "http"}, "e"))  # type: ignore[arg-type]
    await _yield()
    before_grant = bool(ran)
    grant.set()
    await task
    return before_grant


@probe("no-deadline-check")
def _deadline() -> bool:
    from runner_ref import poll_loop
    return poll_loop.deadline_ok(0, 10)


@probe("no-reset-header")
async def _no_reset() -> bool:
    mc, seen = _client()
    await mc.poll(True)
    return "x-runner-reset" not in seen[0]


@probe("upper-case-instance")
async def _upper() -> bool:
    mc, seen = _client()
    await mc.poll(False)
    return seen[0]["x-runner-instance"] != seen[0]["x-runner-instance"].lower()


@probe("sends-origin")
async def _origin() -> bool:
    mc, seen = _client()
    await mc.poll(False)
    return "Origin" in seen[0] or "Origin" in mc._headers_for_post("e")


@probe("first-command-only")
async def _first_only() -> bool:
    mc, _ = _client()
    return len((await mc.poll(False))["commands"]) == 1


@probe("private-feature")
def _feature() -> bool:
    from runner_ref import poll_loop
    return "x-vendor" in poll_loop.features_header(True)


@probe("stable-instance-id")
def _stable() -> bool:
    import runner_ref.__main__ as m
    return m.uuid.uuid4() == m.uuid.uuid4()


@probe("prints-token")
async def _prints() -> bool:
    mc, _ = _client()
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        await mc.poll(True)
    return "s3cret-token" in err.getvalue()


@probe("serial-commands")
async def _serial() -> bool:
    from runner_ref.poll_loop import PollLoop
    started: list[str] = []
    gate = asyncio.Event()

    async def _deliver(cmd: Any, epoch: str) -> None:
        started.append(cmd["id"])
        await gate.wait()
    me = NS(_handling=set(), _tasks=set(), _deliver=_deliver)
    PollLoop._spawn(me, {"id": "a"}, "e")  # type: ignore[arg-type]
    PollLoop._spawn(me, {"id": "b"}, "e")  # type: ignore[arg-type]
    await _yield()
    both = started == ["a", "b"]
    gate.set()
    await asyncio.gather(*me._tasks)
    return not both


@probe("reset-on-every-poll")
async def _sticky_reset() -> bool:
    from runner_ref.machine_client import MachineClient
    sent: list[Any] = []
    await MachineClient.poll(_poll_client(sent), False)  # type: ignore[arg-type]
    return sent == ["reset"]


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


@probe("uncapped-error-text")
def _uncapped_error_text() -> bool:
    from runner_ref import codes
    return len(codes.error_result("hermes_rpc_error", "x" * 5000)["error"]["message"]) > 1000


@probe("keep-alive-websocket")
async def _keep_alive_websocket() -> bool:
    from runner_ref.hermes import HermesClient
    client = HermesClient("http://127.0.0.1:9", None)
    try:
        return not client._http().connector.force_close  # type: ignore[union-attr]
    finally:
        await client.close()
