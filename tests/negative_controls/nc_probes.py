"""One in-process probe per negative control: True when the control's bug is observable.

Each probe drives the patched seam directly (fakes for its collaborators, a real SQLite ledger
where the ledger is the seam) and answers whether the behaviour is the buggy one. The reference
runner must answer False, the patched one True (``test_seams.py``). Probes never depend on the
conformance cases.

The probes live beside their controls, one module per controls module
(``controls_wire.py`` ↔ ``nc_probes_wire.py``); this module holds the registry and the fakes
they share."""
from __future__ import annotations

import asyncio
import os
import tempfile
import uuid
from collections.abc import Callable
from types import SimpleNamespace as NS
from typing import Any

PROBES: dict[str, Callable[[], bool]] = {}


def prober(table: dict[str, Callable[[], bool]]) -> Callable[[str], Callable[[Callable[[], Any]],
                                                                          Callable[[], Any]]]:
    """The ``@probe(name)`` decorator of ``table``: a probe (sync or async) run as ``() -> bool``
    (shared with tests/positive_controls/pc_probes.py)."""
    def probe(name: str) -> Callable[[Callable[[], Any]], Callable[[], Any]]:
        def register(fn: Callable[[], Any]) -> Callable[[], Any]:
            def run() -> bool:
                out = fn()
                if asyncio.iscoroutine(out):
                    out = asyncio.run(out)
                return bool(out)
            table[name] = run
            return fn
        return register
    return probe


probe = prober(PROBES)


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


# -- fakes shared by several probe modules ----------------------------------------------------
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


def _gateways(**kw: Any) -> Any:
    from runner_ref.gateway import Gateways

    async def post_event(body: Any) -> None:
        return None
    return Gateways(kw.get("hermes", NS()), ("default",), post_event,
                    kw.get("on_fatal", lambda: None))


def _leases(plugin: Any = None) -> Any:
    from runner_ref.teamtools.leases import LeaseManager

    async def relay(*args: Any) -> Any:
        return None
    sessions = NS(owner_of=lambda rid: ("c1", "default"), stored_id=lambda rid: None)
    return LeaseManager(relay=relay, plugin=plugin or NS(), sessions=sessions,  # type: ignore[arg-type]
                        auto_renew=False)


async def _noop(*_a: Any, **_k: Any) -> None:
    return None


def _poll_client(sent: list[Any]) -> Any:
    async def request(method: str, route: str, headers: Any, body: Any, timeout: float) -> Any:
        sent.append(headers)
        return {"epoch": "e", "commands": []}
    return NS(_request=request, _poll_headers={True: "reset", False: "plain"})
