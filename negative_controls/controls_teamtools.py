"""Negative controls of team tools: the loopback listener, tool ids, callIds, bind/unbind."""
from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hashlib
from types import SimpleNamespace
from typing import Any

from aiohttp import web

from runner_ref.teamtools import gates
from runner_ref.teamtools.call_rules import CallDecision

from .control import Control, const

TT = "runner_ref.teamtools"


def _skip_gate(name: str) -> Any:
    def make(orig: Any) -> Any:
        def first_failure(req: Any, ctx: Any, gate_list: tuple[Any, ...]) -> Any:
            return orig(req, ctx, tuple(g for g in gate_list if g.name != name))
        return first_failure
    return make


def _origin_ignored(orig: Any) -> Any:
    def first_failure(req: Any, ctx: Any, gate_list: tuple[Any, ...]) -> Any:
        loopback = [g for g in gate_list if g.name == "loopback"]
        if loopback and not loopback[0].passes(dataclasses.replace(req, origin=None), ctx):
            return gates.Refusal(loopback[0].row)
        return orig(req, ctx, tuple(g for g in gate_list if g.name != "loopback"))
    return first_failure


def _decision(change: dict[CallDecision, CallDecision], no_limit: bool = False) -> Any:
    def make(orig: Any) -> Any:
        def decide(seen: dict[str, str], call: Any, limit: int = 128) -> CallDecision:
            d: CallDecision = orig(seen, call, 10**9 if no_limit else limit)
            return change.get(d, d)
        return decide
    return make


def _relay_opaque(orig: Any) -> Any:
    async def _relay_call(self: Any, real_id: str, call: Any) -> Any:
        return await self._relay(call.tool_id, call.arguments, call.call_id)
    return _relay_call


def _all_interfaces(orig: Any) -> Any:
    async def start(self: Any) -> None:
        server = web.Server(self._handle, access_log=None,
                            keepalive_timeout=self._timings.keepalive,
                            max_headers=self._timings.max_headers)
        runner = web.ServerRunner(server, shutdown_timeout=self._timings.shutdown)
        await runner.setup()
        await web.TCPSite(runner, "0.0.0.0", 0).start()   # reachable from the network
        self._runner = runner
        self.port = runner.addresses[0][1]
    return start


def _unsalted(orig: Any) -> Any:
    return lambda token, real_id: "team_" + hashlib.sha256(real_id.encode()).hexdigest()[:32]


async def _noop(*_args: Any) -> None:
    return None


# -- the lease token, the bind answer -------------------------------------------------------
def _short_token(orig: Any) -> Any:
    return SimpleNamespace(token_urlsafe=lambda nbytes=32: orig.token_urlsafe(8))


def _trust_any_bind(orig: Any) -> Any:
    async def post_json(self: Any, path: str, body: dict[str, Any]) -> tuple[int, Any]:
        status, reply = await orig(self, path, body)
        if path.endswith("/bind") and isinstance(reply, dict) and reply.get("ok") is True:
            reply = {**reply, "native_tools": True}   # ok is taken as "tools available"
        return status, reply
    return post_json


# -- the lease re-check (§6.5) --------------------------------------------------------------
_SEAM = "runner_ref.teamtools.leases:LeaseManager._renew"


def _renew_without_recheck(orig: Any) -> Any:
    async def _renew(self: Any, lease: Any, now: float) -> None:
        lease.next_renew = now + self.renew_every   # the timer ticks, nothing is checked or bound
    return _renew


def _renew_keeping_expiry(orig: Any) -> Any:
    async def _renew(self: Any, lease: Any, now: float) -> None:
        kept = lease.expires_at
        await orig(self, lease, now)
        lease.expires_at = kept   # re-bound (Hermes is told 30 min), the lease's own expiry stays
    return _renew


def _renew_ignoring_rebind(orig: Any) -> Any:
    async def _renew(self: Any, lease: Any, now: float) -> None:
        lease.next_renew = now + self.renew_every
        if not self._owned(lease):
            await self._dispose(lease)
            return
        lease.expires_at = now + self.ttl
        if lease.bound:
            with contextlib.suppress(Exception):   # "best effort": a failed re-bind is ignored
                await self._bind(lease)
    return _renew


# -- a bind in flight when the stored id changes --------------------------------------------
def _bind_once(orig: Any) -> Any:
    from runner_ref import codes
    from runner_ref.errors import CommandError
    from runner_ref.teamtools import leases as L

    async def _bind(self: Any, lease: Any) -> None:
        async with lease.bind_lock:
            first = not lease.bound
            lease.expires_at = self._clock() + self.ttl
            body = self._bind_body(lease)
            lease.bind_sent = True
            try:
                status, reply = await asyncio.wait_for(
                    self._plugin.post_json(L.BIND_PATH, body), self._plugin_timeout)
            except Exception:
                status, reply = 0, None
            if lease.state is L.State.DISPOSED:
                await self._unbind(lease)
                raise L._expired()
            if status != 200 or not isinstance(reply, dict) or reply.get("ok") is not True:
                raise CommandError.of(codes.TEAM_TOOLS_BIND_FAILED)
            if first and reply.get("native_tools") is not True:
                raise CommandError.of(codes.TEAM_TOOLS_UNAVAILABLE)
            lease.bound = True   # one bind; a stored id changed meanwhile waits for the re-check
            lease.next_renew = self._clock() + self.renew_every
    return _bind


CONTROLS: tuple[Control, ...] = (
    Control("listener-no-token-check", "team-tools",
            "The loopback listener serves calls without checking the lease token.",
            "'loopback is trusted': any local process calls the tools",
            f"{TT}.gates:first_failure", ("TT-004",), _skip_gate("token")),
    Control("listener-allows-origin", "team-tools",
            "The loopback listener accepts requests that carry an Origin header.",
            "DNS-rebinding / browser CSRF into a localhost service",
            f"{TT}.gates:first_failure", ("TT-005",), _origin_ignored),
    Control("listener-no-size-limit", "team-tools",
            "The loopback listener has no body size gate (a big body is read and fails as JSON).",
            "unbounded request bodies on a local service",
            f"{TT}.gates:first_failure", ("TT-008",), _skip_gate("size")),
    Control("listener-on-all-interfaces", "team-tools",
            "The loopback listener binds 0.0.0.0 instead of 127.0.0.1.",
            "a 'local' service exposed to the network",
            f"{TT}.listener:LoopbackListener.start", ("TT-017",), _all_interfaces),
    Control("real-tool-ids", "team-tools", "tools/list shows the real tool ids.",
            "internal identifiers leaked to the model (and stable across leases)",
            f"{TT}.ids:opaque_id", ("TT-002",), lambda _orig: lambda token, real_id: real_id,
            rebind=True),
    Control("unsalted-tool-ids", "team-tools",
            "Opaque tool ids are a hash of the real id alone, the same in every lease.",
            "unsalted hashes: ids linkable across leases and guessable",
            f"{TT}.ids:opaque_id", ("TT-003",), _unsalted, rebind=True),
    Control("no-callid-dedupe", "team-tools", "A repeated callId is relayed again.",
            "tool calls retried by the model run twice (double side effects)",
            f"{TT}.call_book:decide", ("TT-011",),
            _decision({CallDecision.REPEAT: CallDecision.NEW})),
    Control("callid-ignores-arguments", "team-tools",
            "A repeated callId with other arguments shares the first outcome (no conflict).",
            "idempotency keys without a request fingerprint",
            f"{TT}.call_book:decide", ("TT-012",),
            _decision({CallDecision.CONFLICT: CallDecision.REPEAT})),
    Control("no-call-limit", "team-tools", "No limit on distinct callIds per lease.",
            "unbounded memory per lease; a looping model never stopped",
            f"{TT}.call_book:decide", ("TT-013",), _decision({}, no_limit=True)),
    Control("relays-opaque-id", "team-tools",
            "Relays the opaque tool id to the control plane instead of the real one.",
            "an id translation done on the way in but not on the way out",
            f"{TT}.listener:LoopbackListener._relay_call", ("TT-010",), _relay_opaque),
    Control("no-unbind-on-close", "team-tools", "lease.close never tells the plugin to unbind.",
            "revoked tool grants still bound in Hermes (stale credentials)",
            f"{TT}.leases:LeaseManager._unbind", ("TT-016", "CAN-006"),
            lambda _orig: _noop),
    Control("short-lease-token", "team-tools",
            "Mints lease tokens of 8 random bytes.",
            "guessable bearer tokens on a loopback port any local process can reach",
            "runner_ref.teamtools.listener:secrets", ("TT-903",), _short_token),
    Control("bind-ignores-native-tools", "team-tools",
            "Takes any {ok:true} bind answer as bound, without native_tools:true.",
            "tools announced to a Hermes build that cannot serve them (silent no-op tools)",
            "runner_ref.hermes:HermesClient.post_json", ("TT-904",), _trust_any_bind),
    Control("no-lease-recheck", "team-tools",
            "Its 5-min lease timer neither re-checks nor re-binds the lease.",
            "a lease set up once and trusted until it expires (no periodic re-check)",
            _SEAM, ("TT-905",), _renew_without_recheck),
    Control("recheck-keeps-expiry", "team-tools",
            "A passing re-check re-binds but leaves the lease's own expiry where it was.",
            "two copies of one deadline (the one sent to Hermes, the one enforced) drifting apart",
            _SEAM, ("TT-906",), _renew_keeping_expiry),
    Control("failed-rebind-kept", "team-tools",
            "A re-check whose re-bind fails keeps the lease alive.",
            "best-effort renewal: tools keep being served to a Hermes that refused the binding",
            _SEAM, ("TT-907",), _renew_ignoring_rebind),
    Control("lease-stored-id-stale", "team-tools",
            "Keeps a lease's stored session id from lease.create; later session.info frames "
            "do not update it.",
            "state copied at creation and never refreshed (Hermes rotated the session's storage)",
            "runner_ref.teamtools.leases:LeaseManager.on_session_info", ("TT-908",),
            const(lambda self, runtime_id, stored_id: None)),
    Control("bind-once-in-flight", "team-tools",
            "Binds once: a stored session id that changed while the bind was in flight is left "
            "to the next 5-min re-check.",
            "a check-then-act window: the plugin holds tools bound to a stored session Hermes "
            "has already rotated away from, for up to 5 min",
            "runner_ref.teamtools.leases:LeaseManager._bind", ("TT-909",), _bind_once),
)
