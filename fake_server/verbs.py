"""The harness verbs of the control plane: commands, channels and leases (mixed into the façade).

Rules:
- ``submit`` queues and returns the handle at once; a refusal at enqueue gives a handle already
  done (``Command.refused``, with the rule's reason).
- Like upstream, a ``gateway.open`` that fails or is aborted is followed by ``gateway.close`` for
  the same connection id, and a failed or aborted ``lease.create`` by ``lease.close`` (the
  follow-up is queued, not awaited: ``ch.close_command`` / ``lease.close_command``).
- Stop methods carry no account and no profile (``validity.STOP_METHODS``).
- Every command is sent as upstream's control plane would send it: where upstream always names
  the profile and the caller did not, it is filled from the command's or the channel's profile
  (``upstream_payloads.complete``). ``as_sent=True`` sends the payload exactly as given: a case
  whose purpose is a command upstream would not send says so at the call site.
- With ``HERMES_CONFORMANCE_COMMAND_LOG`` set, every submitted command is appended to that file
  (one JSON line: kind, payload, as_sent, the pytest case: :data:`CURRENT_TEST` when a lane set
  it, else ``PYTEST_CURRENT_TEST``): ``tests/oracle_fairness`` checks
  them against ``upstream_payloads.KINDS``.
- ``open_channel`` never hands a caller an outcome the control plane made on its own: a
  ``gateway.open`` ended ``runner_offline`` while the runner was between two online states (its
  poll had just closed; ``Command.ended_offline``) is sent again once the runner, still enabled,
  is online (at most :data:`OFFLINE_RETRIES` times), as a replay is (``redeliver``).
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Sequence
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from .handles import Channel, Command, CommandRefused, Lease, ToolHandler
from .lifecycle import Outcome
from .upstream_payloads import complete
from .validity import command_profile, is_stop

if TYPE_CHECKING:  # the host's attributes (no import of the façade module: no circle)
    from .hub import Hub
    from .lifecycle_log import LifecycleLog
    from .store import Store
    from .timings import Limits


class CommandFailed(Exception):
    """A harness helper's command did not succeed; ``outcome`` says how."""

    def __init__(self, outcome: Outcome) -> None:
        super().__init__(f"{outcome.status} {outcome.code}: {outcome.message}")
        self.outcome = outcome


def _open_payload(ch: Channel, extra: dict[str, Any]) -> dict[str, Any]:
    """The gateway.open payload: ``{connectionId[, cleanupOnly:true], **extra}``."""
    payload: dict[str, Any] = {"connectionId": ch.connection_id}
    if ch.cleanup_only:
        payload["cleanupOnly"] = True
    payload.update(extra)
    return payload


COMMAND_LOG = "HERMES_CONFORMANCE_COMMAND_LOG"
#: the test a command is logged for when several run in one process at once (the harness's
#: lanes set it per case); else pytest's own ``PYTEST_CURRENT_TEST``
CURRENT_TEST: ContextVar[str | None] = ContextVar("hermes_conformance_current_test", default=None)
#: how often a command the control plane ended offline on its own is sent again, and how long
#: the runner is waited for to be online before each (scaled by the timeout multiplier)
OFFLINE_RETRIES = 3
OFFLINE_WAIT = 20.0


def _log_command(kind: str, payload: dict[str, Any], as_sent: bool) -> None:
    path = os.environ.get(COMMAND_LOG)
    if not path:
        return
    line = json.dumps({"kind": kind, "payload": payload, "as_sent": as_sent,
                       "case": CURRENT_TEST.get() or os.environ.get("PYTEST_CURRENT_TEST", "")},
                      default=str)
    with open(path, "a", encoding="utf-8") as f:  # one short append per command
        f.write(line + "\n")


class Verbs:
    limits: Limits
    lifecycle: LifecycleLog
    _followups: set[asyncio.Task[Any]]

    @property
    def hub(self) -> Hub: raise NotImplementedError

    @property
    def store(self) -> Store: raise NotImplementedError

    def _revoked(self, runner_id: str, what: str, **kw: Any) -> None: raise NotImplementedError
    async def wait_online(self, runner_id: str, timeout: float = 10.0) -> str:
        raise NotImplementedError

    # -- commands ------------------------------------------------------------------------------

    async def submit(
        self, runner_id: str, kind: str, payload: dict[str, Any], *, account: str | None = None,
        deadline: float | None = None, profile: str | None = None, expires_at_ms: int | None = None,
        channel: Channel | None = None, lease: Lease | None = None, command_id: str | None = None,
        as_sent: bool = False,
    ) -> Command:
        """Queue a command and return its handle at once (``await handle`` → Outcome).

        ``command_id`` reuses an id instead of minting one (see :meth:`replay`); ``as_sent``
        sends ``payload`` exactly as given (a case testing a command upstream would not send)."""
        if not as_sent:
            payload = complete(kind, payload, profile or (channel.profile if channel else None))
        _log_command(kind, payload, as_sent)
        try:
            return await self.hub.enqueue(
                runner_id, kind, payload, account=account, deadline=deadline, profile=profile,
                channel=channel, lease=lease, expires_at_ms=expires_at_ms, command_id=command_id,
            )
        except CommandRefused as refused:
            return Command.refused(runner_id, kind, payload, refused.outcome, expires_at_ms or 0, refused.reason)

    async def replay(
        self, runner_id: str, wire: dict[str, Any], *, account: str | None = None,
        payload: dict[str, Any] | None = None, deadline: float | None = None,
    ) -> Command:
        """Queue again a command a runner was already given: same ``id``, ``kind`` and
        ``expiresAt`` (and payload, unless ``payload`` replaces it to provoke a fingerprint
        conflict); the runner must answer it from its ledger, never run it twice. The payload
        is sent as given (``as_sent``): the wire was completed when it was first sent, and a
        replay must not change what the fingerprint covers."""
        return await self.submit(
            runner_id, wire["kind"], wire["payload"] if payload is None else payload,
            account=account, deadline=deadline, expires_at_ms=wire["expiresAt"], command_id=wire["id"],
            as_sent=True,
        )

    async def command(
        self, runner_id: str, kind: str, payload: dict[str, Any], *, account: str | None = None,
        deadline: float | None = None, profile: str | None = None, expires_at_ms: int | None = None,
        as_sent: bool = False,
    ) -> Outcome:
        """Queue a command and await its outcome."""
        return await (await self.submit(runner_id, kind, payload, account=account, deadline=deadline,
                                        profile=profile, expires_at_ms=expires_at_ms, as_sent=as_sent))

    async def _back_online(self, runner_id: str, handle: Command) -> bool:
        """Whether ``handle`` ended on the control plane's own account (``ended_offline``: the
        runner was between two online states, e.g. its poll had just closed) and the runner,
        still enabled, is online again: the command was never the runner's to judge, so the
        caller sends it again. Never for a disabled runner (its refusal is the case's)."""
        if not handle.ended_offline:
            return False
        record = await self.store.get_runner(runner_id)
        if record is None or not record.enabled:
            return False
        try:
            await self.wait_online(runner_id, timeout=OFFLINE_WAIT)
        except TimeoutError:
            return False
        return True

    def _follow_up(self, runner_id: str, kind: str, payload: dict[str, Any]) -> None:
        """Queue a follow-up (gateway.close / lease.close) from a task: survives a cancelled caller."""
        task = asyncio.ensure_future(self.submit(runner_id, kind, payload))
        self._followups.add(task)
        task.add_done_callback(self._followups.discard)

    # -- channels ------------------------------------------------------------------------------

    async def open_channel(
        self, runner_id: str, account: str | None = None, profile: str | None = None,
        cleanup_only: bool = False, connection_id: str | None = None, *,
        deadline: float | None = None, check: bool = True, as_sent: bool = False, **extra: Any,
    ) -> Channel:
        """Send gateway.open and return the channel once the runner answered.

        With ``check`` (default) a failed open raises ``CommandFailed``; else the channel comes
        back closed with ``open_outcome`` set. A failed or aborted open is followed by
        ``gateway.close`` for the same id, as upstream does."""
        for attempt in range(OFFLINE_RETRIES + 1):
            ch, handle = await self.submit_open_channel(
                runner_id, account, profile, cleanup_only, connection_id, deadline=deadline,
                as_sent=as_sent, **extra,
            )
            try:
                outcome = await handle
            except BaseException:  # aborted: upstream's open() catch closes it too
                self.hub.close_channel(ch, "open_aborted")
                self._follow_up(runner_id, "gateway.close", {"connectionId": ch.connection_id})
                raise
            if attempt == OFFLINE_RETRIES or not await self._back_online(runner_id, handle):
                break
            self.hub.close_channel(ch, "open_failed")  # never judged by the runner: open again
        ch.open_outcome = outcome
        if not outcome.ok:
            capped = ch.closed.is_set() and ch.closed_by == "open_failed"  # never sent (harness cap)
            self.hub.close_channel(ch, "open_failed")
            if not capped:
                self._follow_up(runner_id, "gateway.close", {"connectionId": ch.connection_id})
            if check:
                raise CommandFailed(outcome)
        return ch

    async def submit_open_channel(
        self, runner_id: str, account: str | None = None, profile: str | None = None,
        cleanup_only: bool = False, connection_id: str | None = None, *,
        deadline: float | None = None, as_sent: bool = False, **extra: Any,
    ) -> tuple[Channel, Command]:
        """Register a channel and queue its gateway.open without waiting (for race tests)."""
        acc = await self.store.get_account(account) if account is not None else None
        version = acc.authorization_version if acc else 0
        name = acc.name if acc else None
        try:
            ch = self.hub.register_channel(runner_id, name, version, profile, cleanup_only, connection_id)
        except CommandRefused as refused:  # the opt-in harness cap: a done handle, nothing sent
            ch = Channel.refused(runner_id, connection_id, name, version, profile, cleanup_only, refused.outcome)
            return ch, Command.refused(runner_id, "gateway.open", _open_payload(ch, extra), refused.outcome,
                                       reason=refused.reason)
        handle = await self.submit(runner_id, "gateway.open", _open_payload(ch, extra), account=account,
                                   deadline=deadline, profile=profile, channel=ch, as_sent=as_sent)
        return ch, handle

    async def submit_rpc(
        self, ch: Channel, method: str, params: dict[str, Any] | None = None, *,
        deadline: float | None = None, as_sent: bool = False,
    ) -> Command:
        """gateway.rpc on ``ch`` (``params.profile`` filled from the channel where upstream always
        sends it, unless ``as_sent``)."""
        payload: dict[str, Any] = {"connectionId": ch.connection_id, "method": method, "params": params or {}}
        if not as_sent:
            payload = complete("gateway.rpc", payload, ch.profile)
        stop = is_stop("gateway.rpc", payload)
        return await self.submit(
            ch.runner_id, "gateway.rpc", payload, account=None if stop else ch.account, deadline=deadline,
            profile=None if stop else command_profile("gateway.rpc", payload), channel=ch, as_sent=as_sent,
        )

    async def rpc(
        self, ch: Channel, method: str, params: dict[str, Any] | None = None, *,
        deadline: float | None = None, as_sent: bool = False,
    ) -> Outcome:
        """gateway.rpc on a channel; non-stop methods need the channel still valid."""
        return await (await self.submit_rpc(ch, method, params, deadline=deadline, as_sent=as_sent))

    async def close_channel(self, ch: Channel, *, deadline: float | None = None) -> Outcome:
        """Close server-side (its queued commands → 409 runner_command_not_admitted), then gateway.close."""
        self.hub.close_channel(ch, "harness")
        return await self.command(ch.runner_id, "gateway.close", {"connectionId": ch.connection_id}, deadline=deadline)

    def revoke_channel(self, ch: Channel) -> None:
        """Revoke the channel's authorization: admit refuses its non-stop commands, its next event
        is answered 410 and closes it, ``check`` says not allowed."""
        ch.revoked = True
        self._revoked(ch.runner_id, "channel", connection_id=ch.connection_id)

    # -- leases --------------------------------------------------------------------------------

    async def create_lease(
        self, ch: Channel, *, profile: str, session: dict[str, Any], tools: Sequence[dict[str, Any]] = (),
        handlers: dict[str, ToolHandler] | None = None, work_id: str | None = None,
        deadline: float | None = None, check: bool = True, **extra: Any,
    ) -> Lease:
        """Register a hub lease and send lease.create; tool calls go to ``handlers`` by tool id
        (``"*"`` catches all). A failed or aborted create is followed by ``lease.close``."""
        try:
            lease = self.hub.register_lease(ch, profile, dict(session), list(tools), dict(handlers or {}))
        except CommandRefused as refused:  # the opt-in harness cap: nothing sent
            if check:
                raise CommandFailed(refused.outcome) from None
            lease = Lease(ch.runner_id, ch, profile, dict(session), list(tools), dict(handlers or {}),
                          self.limits.tool_calls_per_lease)
            lease.active = False
            lease.create_outcome = refused.outcome
            return lease
        payload: dict[str, Any] = {
            "leaseId": lease.lease_id, "profile": profile, "workId": work_id or lease.lease_id,
            "session": dict(session), "catalog": list(tools), "workspaceMemory": False,
        }
        payload.update(extra)
        handle = await self.submit(ch.runner_id, "lease.create", payload, account=ch.account,
                                   deadline=deadline, profile=profile, channel=ch, lease=lease)
        try:
            outcome = await handle
        except BaseException:  # aborted: upstream's dispose() sends lease.close
            self.hub.drop_lease(lease)
            self._follow_up(ch.runner_id, "lease.close", {"leaseId": lease.lease_id})
            raise
        lease.create_outcome = outcome
        if not outcome.ok:
            self.hub.drop_lease(lease)
            self._follow_up(ch.runner_id, "lease.close", {"leaseId": lease.lease_id})
            if check:
                raise CommandFailed(outcome)
        return lease

    async def bind_lease(
        self, lease: Lease, session: dict[str, Any] | None = None, *, deadline: float | None = None
    ) -> Outcome:
        payload = {"leaseId": lease.lease_id, "session": dict(session or lease.session)}
        return await self.command_for_lease(lease, "lease.bind", payload, deadline=deadline)

    async def command_for_lease(
        self, lease: Lease, kind: str, payload: dict[str, Any], *, deadline: float | None = None
    ) -> Outcome:
        return await (await self.submit(
            lease.runner_id, kind, payload, account=lease.channel.account, deadline=deadline,
            profile=lease.profile, channel=lease.channel, lease=lease,
        ))

    async def close_lease(self, lease: Lease, *, deadline: float | None = None) -> Outcome:
        self.hub.drop_lease(lease)
        return await self.command(lease.runner_id, "lease.close", {"leaseId": lease.lease_id}, deadline=deadline)

    def revoke_lease(self, lease: Lease) -> None:
        """Drop the hub lease: tool calls → 410 runner_lease_expired, lease.bind not admitted."""
        self.hub.drop_lease(lease)
        self._revoked(lease.runner_id, "lease", lease_id=lease.lease_id)
