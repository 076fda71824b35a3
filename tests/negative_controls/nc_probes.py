"""One in-process probe per negative control: True when the control's bug is observable.

Each probe drives the patched seam directly (fakes for its collaborators, a real SQLite ledger
where the ledger is the seam) and answers whether the behaviour is the buggy one. The reference
runner must answer False, the patched one True (``test_seams.py``). Probes never depend on the
conformance cases.
"""
from __future__ import annotations

import asyncio
import contextlib
import io
import os
import tempfile
import uuid
from collections.abc import Callable
from types import SimpleNamespace as NS
from typing import Any

PROBES: dict[str, Callable[[], bool]] = {}


def probe(name: str) -> Callable[[Callable[[], Any]], Callable[[], Any]]:
    def register(fn: Callable[[], Any]) -> Callable[[], Any]:
        def run() -> bool:
            out = fn()
            if asyncio.iscoroutine(out):
                out = asyncio.run(out)
            return bool(out)
        PROBES[name] = run
        return fn
    return register


async def _yield(n: int = 5) -> None:
    for _ in range(n):
        await asyncio.sleep(0)


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


def _raises(fn: Callable[[], Any], exc: type[BaseException] = Exception) -> bool:
    try:
        fn()
    except exc:
        return True
    return False


# -- wire ------------------------------------------------------------------------------------
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


def _client(answer: Any = None, error: BaseException | None = None) -> tuple[Any, list[Any]]:
    from runner_ref.machine_client import MachineClient
    mc = MachineClient("http://127.0.0.1:9", "rid", "s3cret-token-" + "x" * 30,
                       "0a1b2c3d-0000-4000-8000-00000000abcd", "f")
    seen: list[Any] = []

    async def _request(method: str, route: str, headers: dict[str, str], data: Any,
                       timeout: float) -> Any:
        seen.append(dict(headers))
        if error is not None:
            raise error
        return answer if answer is not None else {"epoch": "e1", "commands": [{"id": "a"},
                                                                              {"id": "b"}]}
    mc._request = _request  # type: ignore[method-assign]
    return mc, seen


@probe("no-reset-header")
async def _no_reset() -> bool:
    mc, seen = _client()
    await mc.poll(True)
    return "x-runner-reset" not in seen[0]


@probe("reset-only-first-poll")
async def _reset_first() -> bool:
    mc, seen = _client()
    await mc.poll(True)
    await mc.poll(True)
    return "x-runner-reset" not in seen[1]


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


@probe("stale-epoch-header")
def _stale_epoch() -> bool:
    mc, _ = _client()
    mc._headers_for_post("e1")
    return mc._headers_for_post("e2")["x-runner-epoch"] == "e1"


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


async def _poll_error(status: int, code: str) -> str:
    from runner_ref.errors import ServerError
    mc, _ = _client(error=ServerError(status, code, "x"))
    try:
        await mc.poll(True)
    except ServerError as exc:
        return exc.code
    return ""


@probe("exits-on-poll-error")
async def _exits() -> bool:
    return await _poll_error(503, "service_updating") == "runner_unauthorized"


@probe("retry-after-unauthorized")
async def _retries() -> bool:
    return await _poll_error(403, "runner_unauthorized") != "runner_unauthorized"


@probe("crash-on-malformed-poll")
async def _malformed() -> bool:
    mc, _ = _client(answer=["not", "an", "object"])
    try:
        await mc.poll(True)
    except SystemExit:
        return True
    except Exception:  # noqa: BLE001 - the reference's coded error
        return False
    return False


@probe("no-reconnect-delay")
def _delay() -> bool:
    from runner_ref import poll_loop
    return poll_loop.timings.RECONNECT_DELAY == 0


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


class _Ledger:
    """A real LedgerStore in a temp dir."""

    async def __aenter__(self) -> Any:
        from runner_ref.ledger_store import LedgerStore
        self.dir = tempfile.TemporaryDirectory(prefix="negctl-probe-")
        self.path = os.path.join(self.dir.name, "ledger.sqlite3")
        self.store = await LedgerStore.open(self.path)
        return self

    async def __aexit__(self, *exc: Any) -> None:
        for task in list(self.store.__dict__.get("_nc_pending", ())):
            task.cancel()
        await self.store.close()
        self.dir.cleanup()


@probe("result-lost-on-5xx")
async def _result_lost() -> bool:
    from runner_ref.errors import ServerError
    from runner_ref.poll_loop import PollLoop
    async with _Ledger() as ledger:
        store = ledger.store
        await store.claim("c", "f", 0)
        await store.complete("c", '{"result":1}')

        async def _handle(cmd: Any, epoch: str) -> Any:
            return {"result": 1}, '{"result":1}'

        async def post_encoded(route: str, data: bytes, epoch: str | None = None) -> Any:
            raise ServerError(503, "runner_request_failed", "HTTP 503")
        me = NS(_handling={"c"}, store=store, _handle=_handle,
                machine=NS(post_encoded=post_encoded))
        await PollLoop._deliver(me, {"id": "c"}, "e")  # type: ignore[arg-type]
        return await store.get("c") is None


async def _disconnect() -> tuple[list[str], list[str]]:
    from runner_ref.poll_loop import PollLoop
    done: list[str] = []

    async def dispose_all() -> None:
        done.append("leases")

    async def close_all() -> None:
        done.append("channels")
    me = NS(_connected=True, _stop=asyncio.Event(), leases=NS(dispose_all=dispose_all),
            gateways=NS(close_all=close_all))
    await PollLoop._disconnect_local(me)  # type: ignore[arg-type]
    return done, []


@probe("keep-channels-on-new-epoch")
async def _keep_channels() -> bool:
    return "channels" not in (await _disconnect())[0]


@probe("keep-leases-on-new-epoch")
async def _keep_leases() -> bool:
    return "leases" not in (await _disconnect())[0]


# -- ledger ----------------------------------------------------------------------------------
@probe("ledger-in-memory")
async def _memory() -> bool:
    from runner_ref.ledger_store import LedgerStore
    async with _Ledger() as ledger:
        await ledger.store.claim("c", "f", 0)
        again = await LedgerStore.open(ledger.path)
        try:
            return await again.get("c") is None
        finally:
            await again.close()


@probe("rerun-started-rows")
def _rerun_started() -> bool:
    from runner_ref import poll_loop
    from runner_ref.ledger import DeliveryDecision, Row, State
    row = Row("c", "f", State.STARTED, None, 0)
    return poll_loop.decide(row, None, "f") is DeliveryDecision.START


@probe("retire-deletes-rows")
async def _retire() -> bool:
    async with _Ledger() as ledger:
        store = ledger.store
        await store.claim("c", "f", 0)
        await store.complete("c", '{"result":1}')
        await store.retire(10**13, 0)
        return await store.get("c") is None


@probe("ignore-fingerprint")
def _fingerprint() -> bool:
    from runner_ref import poll_loop
    one = {"id": "a", "kind": "http", "payload": {"path": "/api/status"}}
    two = {"id": "a", "kind": "http", "payload": {"path": "/api/profiles"}}
    return poll_loop.command_fingerprint(one) == poll_loop.command_fingerprint(two)


@probe("claim-upserts")
async def _upsert() -> bool:
    async with _Ledger() as ledger:
        store = ledger.store
        await store.claim("c", "f", 0)
        return await store.claim("c", "f", 0) is None


@probe("rerun-inflight-redelivery")
async def _inflight() -> bool:
    from runner_ref.poll_loop import PollLoop
    ran: list[str] = []

    async def _admit_and_execute(cmd: Any, epoch: str) -> Any:
        ran.append(cmd["id"])
        return {"result": 1}

    async def post_encoded(route: str, data: bytes, epoch: str | None = None) -> Any:
        return None
    me = NS(_handling={"a"}, _tasks=set(), _admit_and_execute=_admit_and_execute,
            machine=NS(post_encoded=post_encoded), _conflicts_in_flight=lambda cmd: False)
    PollLoop._spawn(me, {"id": "a"}, "e")  # type: ignore[arg-type]
    await _yield()
    await asyncio.gather(*me._tasks)
    return ran == ["a"]


async def _stored_state(reply: str) -> Any:
    async with _Ledger() as ledger:
        store = ledger.store
        await store.claim("c", "f", 0)
        await store.complete("c", reply)
        return (await store.get("c")).state.value


@probe("refusals-not-stored")
async def _refusals() -> bool:
    return await _stored_state('{"error":{"message":"no","code":"x"}}') == "started"


@probe("receipt-cap")
async def _receipt_cap() -> bool:
    from negative_controls.controls_ledger import RECEIPT_CAP
    async with _Ledger() as ledger:
        store = ledger.store
        for i in range(RECEIPT_CAP + 1):
            await store.claim(f"c{i}", "f", i)
            await store.complete(f"c{i}", '{"result":1}')
        return await store.get("c0") is None and await store.get(f"c{RECEIPT_CAP}") is not None


@probe("write-behind-receipts")
async def _write_behind() -> bool:
    return await _stored_state('{"result":1}') == "started"
