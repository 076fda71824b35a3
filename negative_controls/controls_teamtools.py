"""Negative controls of team tools: the loopback listener, tool ids, callIds, bind/unbind."""
from __future__ import annotations

import dataclasses
import hashlib
from typing import Any

from aiohttp import web

from runner_ref.teamtools import gates
from runner_ref.teamtools.call_rules import CallDecision

from .control import Control

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
)
