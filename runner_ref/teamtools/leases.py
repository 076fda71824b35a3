"""Team tool leases of the runner: lease.create / lease.bind / lease.close (§3, §6).

Rules of this module:
- A lease lives ``CREATING → ACTIVE → DISPOSED``; nothing leaves ``DISPOSED``. Every disposal
  (lease.close, its channel closing, epoch change, expiry, a failed renewal, a 410 from the relay)
  tombstones the lease id for 60 s, closes its loopback listener and, if a bind was ever sent,
  unbinds it in the plugin.
- lease.create refuses with a plain error (code ``runner_error``) a malformed id (not a UUID), a
  tombstoned id, a duplicate id, the 65th lease, or a malformed payload; a session not owned by an
  open channel under the same profile is 403 ``runner_session_forbidden``. It answers ``{"ok":
  true}`` (our choice: upstream's result is not determined). If the lease is closed while its
  listener is starting (cancellation overtaking creation), the new lease is disposed at once and
  never bound, and lease.create fails with "tool grant stopped".
- lease.bind: an unknown (or not yet created, disposed or expired) lease is 410
  ``runner_lease_expired``;
  a different or no-longer-owned runtimeId is 403 ``runner_session_forbidden``; then the stored
  id is updated and the plugin bind is posted. Its reply must be 200 with ``ok:true`` (else 409
  ``team_tools_bind_failed``), and the first successful bind must report ``native_tools:true``
  (else 409 ``team_tools_unavailable``). If the stored id changed while the bind was in flight,
  the bind is sent once more. Answer: ``{"ok": true}`` (our choice).
- The bind body is ``{native_tools:true, session_id:<runtimeId>, stored_session_id, profile,
  generation:"<workId>:<uuid>" (one per lease), bridge_url, token, expires_at (wall-clock
  milliseconds since the epoch), workspace_memory}``. ``workspace_memory`` is a boolean: the
  truth of the payload's ``workspaceMemory`` (``true``, or a non-empty policy object). A stored id
  still unknown at bind time is looked up in the SessionDirectory again.
- Expiry and renewal run on the injected monotonic clock: a lease expires ``ttl`` after its last
  create/bind/renewal; every ``renew_every`` it checks its session is still owned, extends its
  expiry and (once bound) re-binds; any failure disposes it. ``tick()`` applies all that is due;
  a background timer calls it unless ``auto_renew=False`` (tests drive ``tick()`` themselves).
The lease-id format, the 64-lease limit and the 60 s tombstones are also the control plane's;
they are written independently in fake_server on purpose.
"""
from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from runner_ref import codes, timings
from runner_ref.errors import CommandError, ServerError
from runner_ref.timings import MAX_LEASES

from .lease_payload import _catalog, _expired, _forbidden, _lease_id, _plain, _session, _text
from .listener import ListenerTimings, LoopbackListener

PLUGIN = "/api/plugins/yaoyao-bot-bridge"
BIND_PATH = f"{PLUGIN}/bind"
UNBIND_PATH = f"{PLUGIN}/unbind"

_log = logging.getLogger("runner_ref.teamtools.leases")


class Relay(Protocol):
    """Posts the ``tool`` route ``{leaseId, toolId, arguments, callId}``; returns its ``result``."""

    async def __call__(self, lease_id: str, tool_id: str, arguments: dict[str, Any],
                       call_id: str) -> Any: ...


class PluginClient(Protocol):
    """The authenticated loopback Hermes HTTP client."""

    async def post_json(self, path: str, body: dict[str, Any]) -> tuple[int, Any]: ...


class SessionDirectory(Protocol):
    """The gateway channel registry."""

    def owner_of(self, runtime_id: str) -> tuple[str, str] | None: ...

    def stored_id(self, runtime_id: str) -> str | None: ...


class State(enum.Enum):
    CREATING = "creating"
    ACTIVE = "active"
    DISPOSED = "disposed"


@dataclass(eq=False)
class Lease:
    lease_id: str
    profile: str
    work_id: str
    connection_id: str
    runtime_id: str
    stored_id: str | None
    workspace_memory: Any
    generation: str
    listener: LoopbackListener
    expires_at: float
    next_renew: float
    state: State = State.CREATING
    bound: bool = False
    bind_sent: bool = False
    bind_lock: asyncio.Lock = field(default_factory=asyncio.Lock)


class LeaseManager:
    """All team tool leases of one runner process."""

    def __init__(self, *, relay: Relay, plugin: PluginClient, sessions: SessionDirectory,
                 clock: Callable[[], float] = time.monotonic, ttl: float = timings.LEASE_TTL,
                 renew_every: float = timings.LEASE_RENEW_EVERY,
                 wall_clock: Callable[[], float] = time.time, auto_renew: bool = True,
                 plugin_timeout: float | None = None,
                 listener_timings: ListenerTimings | None = None) -> None:
        self._relay = relay
        self._plugin = plugin
        self._sessions = sessions
        self._clock = clock
        self._wall = wall_clock
        self.ttl = ttl
        self.renew_every = renew_every
        self._auto_renew = auto_renew
        self._plugin_timeout = timings.PLUGIN_TIMEOUT if plugin_timeout is None else plugin_timeout
        self._listener_timings = listener_timings
        self._leases: dict[str, Lease] = {}
        self._tombstones: dict[str, float] = {}
        self._timer: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        self._background: set[asyncio.Task[None]] = set()

    # -- views ------------------------------------------------------------------------------
    def is_tombstoned(self, lease_id: str) -> bool:
        until = self._tombstones.get(lease_id)
        return until is not None and self._clock() < until

    def tombstones(self) -> list[str]:
        return [lease_id for lease_id in self._tombstones if self.is_tombstoned(lease_id)]

    def lease(self, lease_id: str) -> Lease | None:
        return self._leases.get(lease_id)

    def active(self) -> list[Lease]:
        return [lease for lease in self._leases.values() if lease.state is State.ACTIVE]

    # -- commands ---------------------------------------------------------------------------
    async def create(self, payload: dict[str, Any]) -> dict[str, Any]:
        lease_id = _lease_id(payload)
        self._purge_tombstones()
        if self.is_tombstoned(lease_id):
            raise _plain("lease closed")
        if lease_id in self._leases:
            raise _plain("duplicate lease")
        if len(self._leases) >= MAX_LEASES:
            raise _plain("too many leases")
        profile, work_id = _text(payload, "profile"), _text(payload, "workId")
        runtime_id, stored_id = _session(payload)
        tools = _catalog(payload)
        owner = self._sessions.owner_of(runtime_id)
        if owner is None or owner[1] != profile:
            raise _forbidden()
        now = self._clock()
        lease = Lease(
            lease_id=lease_id, profile=profile, work_id=work_id, connection_id=owner[0],
            runtime_id=runtime_id, stored_id=stored_id or self._sessions.stored_id(runtime_id),
            workspace_memory=payload.get("workspaceMemory"),
            generation=f"{work_id}:{uuid.uuid4()}",
            listener=None,  # type: ignore[arg-type]  # set just below, before any await
            expires_at=now + self.ttl, next_renew=now + self.renew_every,
        )
        lease.listener = LoopbackListener(
            tools=tools, relay=lambda tool, args, call: self._relay_call(lease, tool, args, call),
            is_active=lambda: self._is_live(lease), timings=self._listener_timings)
        self._leases[lease_id] = lease
        try:
            await lease.listener.start()
        except BaseException as exc:  # failed or cancelled: leave nothing behind
            if self._leases.get(lease_id) is lease:
                del self._leases[lease_id]
            lease.state = State.DISPOSED
            await lease.listener.close()
            if isinstance(exc, Exception):
                raise _plain("team tools listener failed") from None
            raise
        if lease.state is State.DISPOSED:  # lease.close (or its channel) overtook creation
            await lease.listener.close()
            raise _plain("tool grant stopped")
        lease.state = State.ACTIVE
        self._ensure_timer()
        return {"ok": True}

    async def bind(self, payload: dict[str, Any]) -> dict[str, Any]:
        lease_id = _lease_id(payload)
        lease = self._leases.get(lease_id)
        if lease is None or lease.state is not State.ACTIVE:
            raise _expired()
        if not self._is_live(lease):  # past its expiry, before the timer noticed
            await self._dispose(lease)
            raise _expired()
        runtime_id, stored_id = _session(payload)
        if runtime_id != lease.runtime_id or not self._owned(lease):
            raise _forbidden()
        if stored_id is not None:
            lease.stored_id = stored_id
        await self._bind(lease)
        return {"ok": True}

    async def close(self, payload: dict[str, Any]) -> dict[str, Any]:
        lease_id = _lease_id(payload)
        self._tombstone(lease_id)
        lease = self._leases.get(lease_id)
        if lease is not None:
            await self._dispose(lease)
        return {"ok": True}

    async def dispose_channel(self, connection_id: str) -> None:
        doomed = [lease for lease in self._leases.values() if lease.connection_id == connection_id]
        await asyncio.gather(*(self._dispose(lease) for lease in doomed))

    async def dispose_all(self) -> None:
        await asyncio.gather(*(self._dispose(lease) for lease in list(self._leases.values())))
        timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await timer
        await self.drain()

    async def drain(self) -> None:
        """Await the disposals started in the background so far (after a 410 from the relay)."""
        if self._background:
            await asyncio.gather(*list(self._background), return_exceptions=True)

    def on_session_info(self, runtime_id: str, stored_id: str) -> None:
        for lease in self._leases.values():
            if lease.runtime_id == runtime_id and lease.state is not State.DISPOSED:
                lease.stored_id = stored_id

    # -- expiry and renewal -----------------------------------------------------------------
    async def tick(self) -> None:
        """Apply every expiry and renewal that is due on the clock."""
        self._purge_tombstones()
        now = self._clock()
        for lease in self.active():
            if now >= lease.expires_at:
                await self._dispose(lease)
            elif now >= lease.next_renew:
                await self._renew(lease, now)

    async def _renew(self, lease: Lease, now: float) -> None:
        lease.next_renew = now + self.renew_every
        try:
            if not self._owned(lease):
                raise _forbidden()
            lease.expires_at = now + self.ttl
            if lease.bound:
                await self._bind(lease)
        except Exception:
            await self._dispose(lease)

    def _next_due(self) -> float | None:
        dues = [min(lease.expires_at, lease.next_renew) for lease in self.active()]
        return min(dues) if dues else None

    def _ensure_timer(self) -> None:
        self._wake.set()
        if self._auto_renew and (self._timer is None or self._timer.done()):
            self._timer = asyncio.ensure_future(self._run_timer())

    async def _run_timer(self) -> None:
        while True:
            self._wake.clear()
            due = self._next_due()
            wait = None if due is None else max(0.05, due - self._clock())
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), wait)
            try:
                await self.tick()
            except Exception:
                _log.debug("team tools: renewal tick failed")

    # -- internals --------------------------------------------------------------------------
    def _is_live(self, lease: Lease) -> bool:
        return lease.state is State.ACTIVE and self._clock() < lease.expires_at

    def _owned(self, lease: Lease) -> bool:
        owner = self._sessions.owner_of(lease.runtime_id)
        return owner is not None and owner[1] == lease.profile

    def _tombstone(self, lease_id: str) -> None:
        self._tombstones[lease_id] = self._clock() + timings.TOMBSTONE_TTL

    def _purge_tombstones(self) -> None:
        now = self._clock()
        for lease_id in [k for k, until in self._tombstones.items() if until <= now]:
            del self._tombstones[lease_id]

    def _bind_body(self, lease: Lease) -> dict[str, Any]:
        remaining = max(0.0, lease.expires_at - self._clock())
        if lease.stored_id is None:
            lease.stored_id = self._sessions.stored_id(lease.runtime_id)
        return {
            "native_tools": True,
            "session_id": lease.runtime_id,
            "stored_session_id": lease.stored_id,
            "profile": lease.profile,
            "generation": lease.generation,
            "bridge_url": lease.listener.url,
            "token": lease.listener.token,
            "expires_at": int((self._wall() + remaining) * 1000),
            "workspace_memory": bool(lease.workspace_memory),
        }

    async def _bind(self, lease: Lease) -> None:
        async with lease.bind_lock:
            first = not lease.bound
            for _attempt in range(2):
                lease.expires_at = self._clock() + self.ttl
                body = self._bind_body(lease)
                sent = body["stored_session_id"]
                lease.bind_sent = True
                try:
                    status, reply = await asyncio.wait_for(
                        self._plugin.post_json(BIND_PATH, body), self._plugin_timeout)
                except Exception:
                    status, reply = 0, None
                if lease.state is State.DISPOSED:  # closed while the bind was in flight
                    await self._unbind(lease)
                    raise _expired()
                if status != 200 or not isinstance(reply, dict) or reply.get("ok") is not True:
                    raise CommandError.of(codes.TEAM_TOOLS_BIND_FAILED)
                if first and reply.get("native_tools") is not True:
                    raise CommandError.of(codes.TEAM_TOOLS_UNAVAILABLE)
                lease.bound = True
                first = False
                if lease.stored_id == sent:
                    break
            lease.next_renew = self._clock() + self.renew_every

    async def _unbind(self, lease: Lease) -> None:
        body = {"session_id": lease.runtime_id, "generation": lease.generation}
        try:
            await asyncio.wait_for(self._plugin.post_json(UNBIND_PATH, body), self._plugin_timeout)
        except Exception:
            _log.debug("team tools: unbind failed")

    async def _dispose(self, lease: Lease) -> None:
        if lease.state is State.DISPOSED:
            return
        was_creating = lease.state is State.CREATING
        lease.state = State.DISPOSED
        if self._leases.get(lease.lease_id) is lease:
            del self._leases[lease.lease_id]
        self._tombstone(lease.lease_id)
        if was_creating:
            return  # create() sees DISPOSED once its listener is up and closes it
        await lease.listener.close()
        if lease.bind_sent:
            await self._unbind(lease)

    async def _relay_call(self, lease: Lease, tool_id: str, arguments: dict[str, Any],
                          call_id: str) -> Any:
        try:
            return await self._relay(lease.lease_id, tool_id, arguments, call_id)
        except ServerError as exc:
            if exc.status == 410:  # the control plane no longer knows this lease
                task = asyncio.ensure_future(self._dispose(lease))
                self._background.add(task)
                task.add_done_callback(self._background.discard)
            raise
