"""Positive controls of the team tools (docs/protocol.md §5, §6): the loopback listener's open
choices taken the other way."""
from __future__ import annotations

import secrets
import types
from typing import Any

from runner_ref.codes import Code
from runner_ref.errors import ServerError

from .control import Control, one

OTHER_405 = Code("team_tools_method_not_allowed", 405, "POST only", "listener")


def _hex_tokens(orig: Any) -> Any:
    return types.SimpleNamespace(token_urlsafe=lambda n: secrets.token_hex(n))


def _other_405(orig: Any) -> Any:
    def first_failure(req: Any, ctx: Any, gates: Any) -> Any:
        refusal = orig(req, ctx, gates)
        if refusal is not None and refusal.row.status == 405:
            return type(refusal)(OTHER_405)
        return refusal
    return first_failure


def _forget_transport_failures(orig: Any) -> Any:
    async def run(self: Any, call: Any, execute: Any) -> Any:
        transport = False

        async def tracked() -> Any:
            nonlocal transport
            try:
                return await execute()
            except ServerError as exc:
                transport = exc.status == 0   # no control-plane answer at all
                raise
        answer = await orig(self, call, tracked)
        if transport and self.waiting(call.call_id) == 0:   # a repeat relays it again
            self._seen.pop(call.call_id, None)
            self._tasks.pop(call.call_id, None)
        return answer
    return run


#: the plugin-wait row's bind/unbind wait (s): half the reference runner's, long enough for
#: a bind the harness's plugin holds while the runner forwards a session.info (TT-909)
PLUGIN_WAIT = 5.0

CONTROLS: tuple[Control, ...] = (
    Control("hex-lease-token", "choice",
            "Its text encoding is an implementation choice — not tested (reference runner: "
            "base64url)",
            "encodes the 32-byte lease token base64url (43 chars)",
            "encodes it as hex (64 chars)",
            one("runner_ref.teamtools.listener:secrets", _hex_tokens)),
    Control("other-405-code", "choice",
            "The code of the 405 is an implementation choice",
            "405 method_not_allowed",
            "405 team_tools_method_not_allowed",
            one("runner_ref.teamtools.gates:first_failure", _other_405)),
    Control("invalid-call-other-code", "choice",
            "MUST be refused with status 400 [cases: TT-020]. Its code is an implementation "
            "choice",
            "400 invalid_tool_call",
            "400 team_tool_call_invalid",
            one("runner_ref.codes:INVALID_TOOL_CALL",
                lambda _o: Code("team_tool_call_invalid", 400, "bad tool call", "listener"))),
    Control("relays-transport-failure-again", "choice",
            "Whether a failure that carried no control-plane code (a transport failure) is "
            "remembered or relayed again on a repeat",
            "remembers a transport failure: a repeat callId gets the same failure",
            "forgets it: a repeat of the callId relays the call again",
            one("runner_ref.teamtools.call_book:CallBook.run", _forget_transport_failures)),
    Control("plugin-wait-short", "choice",
            "How long the runner waits for a Hermes reply is an implementation choice",
            "waits 10 s for the plugin's answer to a bind or unbind",
            f"waits {PLUGIN_WAIT:g} s (a clock moved past a re-check while its re-bind is in "
            "flight would time it out)",
            one("runner_ref.timings:PLUGIN_TIMEOUT", lambda _o: PLUGIN_WAIT)),
)
