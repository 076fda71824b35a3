"""A control plane whose next answer to a route is canned: :class:`CannedTap`, the header tap of
``_helpers_wire`` that can answer one request itself (WIR-903/904/905, LIM-905).

Rules: the runner is pointed at the tap through its config file only; every wait is bounded
(``WAIT``).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from conformance.adapter import RunnerExited

from ._helpers_state import until
from ._helpers_wire import HeaderTap

WAIT = 10.0


class CannedTap(HeaderTap):
    """A :class:`HeaderTap` that answers the next request of a route with ``canned[route]``
    (a function of the request giving an aiohttp response, or awaitable one) instead of
    forwarding it; ``then[route]`` (a list) is used up after it, one per request."""

    def __init__(self, upstream: str, *, token: str, secrets: Any) -> None:
        super().__init__(upstream, token=token, secrets=secrets)
        self.canned: dict[str, Callable[[Any], Any]] = {}
        self.then: dict[str, list[Callable[[Any], Any]]] = {}
        self.answered: list[str] = []

    async def _forward(self, request: Any) -> Any:
        route = self.route_of(request.path)
        answer = self.canned.pop(route, None)
        if answer is None and self.then.get(route):
            answer = self.then[route].pop(0)
        if answer is None:
            return await super()._forward(request)
        self._record(request.path_qs, request.headers)
        self.answered.append(route)
        out = answer(request)
        return await out if inspect.isawaitable(out) else out

    async def __aenter__(self) -> CannedTap:
        await super().__aenter__()
        return self

    async def forward(self, request: Any) -> Any:
        return await super()._forward(request)


async def behind_canned(world: Any, tap: HeaderTap) -> None:
    world.runner.config["serverURL"] = tap.url
    world.runner.write_config()
    await world.start_runner()


async def reset_poll_after_canned(world: Any, tap: CannedTap) -> Any:
    await world.runner.guard(until(lambda: tap.answered, "the canned poll answer", WAIT),
                             "the canned poll answer", WAIT + 1)
    mark = world.cp.history.last_seq
    try:
        return await world.runner.guard(world.cp.history.wait_for(
            lambda ex: ex.route == "poll" and ex.reset, timeout=WAIT + 1, after_seq=mark),
            "a reset poll", WAIT)
    except (TimeoutError, RunnerExited):
        return None
