"""Catalogue rows of the team tools cases (tests: conformance/cases/test_team_tools_binding.py,
_listener.py, _calls.py and _leases.py)."""

from __future__ import annotations

from ..case_row import Case

F = "team tools"
TT = "team-tools"

ROWS: tuple[Case, ...] = (
    Case("TT-001", "MUST", "lease.create then lease.bind MUST call the plugin's bind with the "
         "lease's session, a loopback bridge_url, a token and a generation.", "6.4", F, TT),
    Case("TT-002", "MUST", "tools/list MUST expose each catalog entry as an opaque id team_<32hex> "
         "that does not hold the real id, stable for the life of the lease.", "6.2", F, TT),
    Case("TT-003", "MUST", "Opaque ids MUST differ between two concurrent leases for the same tool.",
         "6.2", F, TT),
    Case("TT-004", "MUST", "The listener MUST refuse a missing or wrong lease token with 401 "
         "team_tools_unauthorized.", "6.3", F, TT),
    Case("TT-005", "MUST", "The listener MUST refuse a request with an Origin header or a Host other "
         "than 127.0.0.1:<port> with 403 team_tools_forbidden.", "6.3", F, TT),
    Case("TT-006", "MUST", "The listener MUST refuse a method other than POST with 405.", "6.3", F, TT),
    Case("TT-007", "MUST", "The listener MUST refuse a non-JSON Content-Type with 415.", "6.3", F, TT),
    Case("TT-008", "MUST", "The listener MUST refuse a body over 256 KiB with 413 "
         "team_tool_input_limit.", "6.3", F, TT),
    Case("TT-009", "MUST", "The listener MUST refuse a body that is not a JSON object with 400 "
         "invalid_json and a call of an unknown tool with 404 team_tool_not_found.", "6.3", F, TT),
    Case("TT-010", "MUST", "tools/call MUST relay {leaseId, toolId: <real id>, arguments, callId} "
         "to the tool route and answer the result wrapped as {content:[{type:text}], "
         "structuredContent} (a content array passed through unchanged).", "6.3", F, TT),
    Case("TT-011", "MUST", "The same callId twice MUST give one relay and the same result; after "
         "the grant is revoked a call MUST come back as isError.", "6.3", F, TT,
         upstream="runner.test.ts#11"),
    Case("TT-012", "MUST", "The same callId with other arguments MUST be refused with 409 "
         "idempotency_conflict, without a relay.", "6.3", F, TT),
    Case("TT-013", "MUST", "A 129th distinct callId on one lease MUST be refused with 429 "
         "team_tool_call_limit, without a relay.", "6.3", F, TT),
    Case("TT-014", "MUST", "lease.bind of a lease the runner does not hold (never created, or "
         "closed) MUST be answered runner_lease_expired, without a bind.", "3.6", F, TT),
    Case("TT-015", "MUST", "A control-plane tool error MUST come back from the listener as HTTP 200 "
         "{content:[{type:text, text:<JSON of {error, code}>}], isError:true}.", "6.3", F, TT),
    Case("TT-016", "MUST", "lease.close of a bound lease MUST unbind it in the plugin with the "
         "bind's session and generation, and close the listener.", "3.7", F, TT),
    Case("TT-017", "MUST", "The listener MUST bind to 127.0.0.1 only.", "6.3", F, TT),
    Case("TT-018", "SHOULD", "Each listener refusal SHOULD carry its row's code in a JSON "
         "{error, code} body (415 invalid_content_type).", "6.3", F, TT),
    Case("TT-019", "MUST", "The listener MUST apply its checks in order (forbidden, unauthorized, "
         "method, content type, size, JSON), answering the first that fails.", "6.3", F, TT),
)
ROWS += (
    Case("TT-020", "MUST", "A call body without a toolId, a callId or an object arguments MUST be "
         "refused with status 400, without a relay.", "6.3", F, TT),
    Case("TT-021", "MUST", "The listener's call fingerprint MUST NOT depend on the key order of "
         "arguments: the same callId with reordered keys is the same call.", "6.3", F, TT),
    Case("TT-022", "SHOULD", "lease.close of an unknown lease id SHOULD answer {ok:true}.", "3.7",
         F, TT),
    Case("TT-023", "MUST", "lease.bind naming a session other than the lease's MUST be refused "
         "with runner_session_forbidden, without a bind.", "3.6", F, TT),
    Case("TT-024", "MUST", "A bind the plugin answers with anything but 200 {ok:true} MUST fail "
         "with team_tools_bind_failed.", "6.4", F, TT),
    Case("TT-025", "SHOULD", "A 410 from the tool relay SHOULD dispose the lease: the next call is "
         "not relayed.", "6.3", F, TT),
    # 9NN: sentences of docs/protocol.md that no case tested until the spec-coverage sweep
    # (each tagged with its case there; docs/spec-coverage-gaps.txt lists those still open).
    Case("TT-901", "MUST", "lease.create MUST apply requireProfile to its profile: a profile "
         "outside allowedProfiles is refused, without a bind.", "3.5 lease.create",
         F, feature=TT),
    Case("TT-902", "MUST", "gateway.close MUST dispose the leases of the channel (the plugin's "
         "unbind of a bound lease).", "3.4 gateway.close", F, feature=TT),
    Case("TT-903", "MUST", "The lease token MUST hold at least 32 bytes of randomness: its text "
         "carries at least 256 bits for its alphabet, and two leases get different tokens.",
         "6.3", F, feature=TT),
    Case("TT-904", "MUST", "A first bind whose answer lacks native_tools: true MUST be refused "
         "with team_tools_unavailable.", "6.4", F, feature=TT),
    Case("TT-909", "SHOULD", "If the stored session id changed while a bind was in flight, the "
         "runner SHOULD bind once more: a session.info with a new stored id read while the "
         "plugin holds the first bind is followed by a second bind carrying it.", "6.4", F,
         feature=TT),
    Case("TT-905", "MUST", "Every 5 min after a lease was created the runner MUST re-check it, and "
         "a passing re-check of a bound lease MUST bind it again with the new expires_at: 5 min "
         "on the runner's clock bring a second bind whose expires_at is 30 min from then.",
         "6.5", F, feature=TT, needs=("faketime",)),
    Case("TT-906", "MUST", "A passing re-check MUST move the lease's expiry to 30 min from now: a "
         "lease re-checked every 5 min still serves tools/list 30 min 10 s after its creation.", "6.5", F,
         feature=TT, needs=("faketime",)),
    Case("TT-907", "MUST", "A failing re-bind MUST dispose the lease: when the plugin refuses the "
         "re-check's bind, the lease's listener stops serving (410 team_tools_expired or "
         "closed).", "6.5", F, feature=TT, needs=("faketime",)),
    Case("TT-908", "MUST", "The runner MUST update the stored session id of the leases bound to "
         "a session from each session.info of that session: after Hermes announces a new stored "
         "id, the re-check's bind carries it.", "3.2", F, feature=TT, needs=("faketime",)),
)
