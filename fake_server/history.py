"""The history: every machine-API exchange, in arrival order, readable and awaitable by tests.

Rules:
- ``seq`` is taken from the shared sequence at request receipt, ``seq_out`` when the answer is
  made; one counter can be shared with the lifecycle log and the scripted Hermes' effect log.
- The join keys ``command_id``, ``connection_id``, ``lease_id``, ``call_id`` are parsed once,
  from the request body (admit/result: ``id``), when it is read.
- ``await history.wait_for(predicate, timeout=…)`` returns the first exchange, kept or future,
  that satisfies the predicate; it is re-asked on receipt, when the body is read, and on answer.
"""

from __future__ import annotations

import hashlib
import itertools
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, overload

from .waiting import Waiters


def digest(raw: bytes | None) -> str | None:
    return None if raw is None else hashlib.sha256(raw).hexdigest()


@dataclass
class Exchange:
    """One machine-API request and its answer (``status`` None: dropped without an answer)."""

    seq: int
    time: float  # control-plane clock, seconds
    route: str
    method: str
    runner_id: str
    instance: str | None
    request_epoch: str | None
    reset: bool
    request_digest: str | None
    request_body: Any
    epoch: str | None = None  # the runner's server-side epoch when answered
    status: int | None = None
    code: str | None = None
    response_digest: str | None = None
    response_body: Any = None
    end_time: float | None = None
    fault: str | None = None
    seq_out: int | None = None
    command_id: str | None = None
    connection_id: str | None = None
    lease_id: str | None = None
    call_id: str | None = None

    def set_request_body(self, body: Any) -> None:
        """Keep the parsed body and its join keys (parsed once, here)."""
        self.request_body = body
        if not isinstance(body, dict):
            return

        def text(key: str) -> str | None:
            v = body.get(key)
            return v if isinstance(v, str) else None

        if self.route in ("admit", "result"):
            self.command_id = text("id")
        self.connection_id = text("connectionId")
        self.lease_id = text("leaseId")
        self.call_id = text("callId")

    @property
    def answered(self) -> bool:
        return self.seq_out is not None

    @property
    def commands(self) -> list[dict[str, Any]]:
        """Commands delivered by this exchange (poll responses only)."""
        body = self.response_body
        if self.route == "poll" and isinstance(body, dict):
            cmds = body.get("commands")
            if isinstance(cmds, list):
                return [c for c in cmds if isinstance(c, dict)]
        return []


class History:
    """Exchanges in arrival order; ``seq`` counts from 1 and never repeats.

    ``max_entries`` None (default) keeps everything; a number makes it a ring buffer that keeps
    the newest ``max_entries`` (``dropped`` counts the evicted ones) for long benchmark runs.
    """

    def __init__(self, max_entries: int | None = None, sequence: Callable[[], int] | None = None) -> None:
        if max_entries is not None and max_entries < 1:
            raise ValueError("max_entries must be at least 1 (or None for no cap)")
        self.max_entries = max_entries
        self.sequence = sequence or itertools.count(1).__next__
        self._entries: deque[Exchange] = deque(maxlen=max_entries)
        self._seq = 0
        self._open = 0
        self.dropped = 0
        self._waiters: Waiters[Exchange] = Waiters()

    @property
    def open(self) -> int:
        """Exchanges begun and not answered yet (a held poll, a delayed answer), kept or not."""
        return self._open

    @property
    def entries(self) -> list[Exchange]:
        """A snapshot of the kept exchanges, oldest first."""
        return list(self._entries)

    def begin(self, **kw: Any) -> Exchange:
        self._seq = self.sequence()
        ex = Exchange(seq=self._seq, **kw)
        if self.max_entries is not None and len(self._entries) == self.max_entries:
            self.dropped += 1
        self._entries.append(ex)
        self._open += 1
        self._waiters.notify(ex)
        return ex

    def body_read(self, ex: Exchange, body: Any) -> None:
        """The request body is parsed: keep it and its join keys, and wake waiters."""
        ex.set_request_body(body)
        self._waiters.notify(ex)

    def finish(self, ex: Exchange) -> None:
        """The answer is made (or the request dropped): take ``seq_out`` and wake waiters."""
        if ex.seq_out is None:
            ex.seq_out = self.sequence()
            self._open -= 1
        self._waiters.notify(ex)

    async def wait_for(
        self, predicate: Callable[[Exchange], bool], timeout: float | None = 10.0, *, after_seq: int = 0
    ) -> Exchange:
        """The first exchange with ``seq`` > ``after_seq`` satisfying ``predicate`` (kept or future).

        Predicates usually test ``ex.answered`` too: an exchange is offered on receipt and again
        when answered."""
        return await self._waiters.wait_for(
            (ex for ex in list(self._entries) if ex.seq > after_seq),
            lambda ex: ex.seq > after_seq and predicate(ex), timeout,
        )

    def __iter__(self) -> Iterator[Exchange]:
        return iter(list(self._entries))

    def __len__(self) -> int:
        return len(self._entries)

    @overload
    def __getitem__(self, i: int) -> Exchange: ...

    @overload
    def __getitem__(self, i: slice) -> list[Exchange]: ...

    def __getitem__(self, i: int | slice) -> Exchange | list[Exchange]:
        if isinstance(i, slice):
            return list(self._entries)[i]
        return self._entries[i]

    def since(self, seq: int) -> list[Exchange]:
        """Exchanges with ``seq`` greater than ``seq`` (those still kept)."""
        out: list[Exchange] = []
        for ex in reversed(self._entries):
            if ex.seq <= seq:
                break
            out.append(ex)
        out.reverse()
        return out

    @property
    def last_seq(self) -> int:
        """The seq of the newest exchange so far (0 before the first)."""
        return self._seq

    def filter(
        self,
        *,
        route: str | None = None,
        runner_id: str | None = None,
        status: int | None = None,
        code: str | None = None,
        instance: str | None = None,
        where: Callable[[Exchange], bool] | None = None,
    ) -> list[Exchange]:
        out = []
        for ex in list(self._entries):
            if route is not None and ex.route != route:
                continue
            if runner_id is not None and ex.runner_id != runner_id:
                continue
            if status is not None and ex.status != status:
                continue
            if code is not None and ex.code != code:
                continue
            if instance is not None and ex.instance != instance:
                continue
            if where is not None and not where(ex):
                continue
            out.append(ex)
        return out

    def deliveries(self, command_id: str) -> list[Exchange]:
        """Polls whose answer carried ``command_id``."""
        return [ex for ex in self.filter(route="poll") if any(c.get("id") == command_id for c in ex.commands)]

    def codes(self, route: str | None = None) -> list[str | None]:
        return [ex.code for ex in self.filter(route=route)]

    def clear(self) -> None:
        """Forget the kept exchanges (``seq`` keeps counting)."""
        self._entries.clear()

    def forget_answered(self) -> None:
        """Forget the exchanges already answered (``seq`` keeps counting); one still open — a
        held poll — stays, so what its answer delivers is still seen."""
        open_ = [ex for ex in self._entries if ex.seq_out is None]
        self._entries.clear()
        self._entries.extend(open_)
