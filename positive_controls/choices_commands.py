"""Positive controls of the command kinds (docs/protocol.md §3, §4): codes and refusals the docs
leave open, taken the other way.

A code row swaps one :class:`runner_ref.codes.Code` (read as ``codes.NAME`` at the call site)
for another code of the same status family; the runner is otherwise the reference.
"""
from __future__ import annotations

import re
from typing import Any

from runner_ref import codes
from runner_ref.codes import Code, error_result
from runner_ref.errors import CommandError

from .control import Control, one

UUID_LOWER = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
HERMES_WAIT = 29.5   # below the control plane's 30 s command deadline


def _code(code: str, status: int, message: str) -> Any:
    return lambda _orig: Code(code, status, message)


def _profile_required(orig: Any) -> Any:
    def require_profile(profile: object, allowed: Any) -> str:
        if profile is None:   # no profile named: refused, not read as `default`
            raise CommandError.of(codes.PROFILE_FORBIDDEN)
        return orig(profile, allowed)  # type: ignore[no-any-return]
    return require_profile


def _query_form_only(orig: Any) -> Any:
    def parse_search(search: object) -> dict[str, str]:
        if isinstance(search, str) and search and not search.startswith("?"):
            raise CommandError.of(codes.RUNNER_ERROR, "search must begin with ?")
        return orig(search)  # type: ignore[no-any-return]
    return parse_search


def _computer_other_path(orig: Any) -> Any:
    def plan_http(payload: dict[str, Any], allowed: Any, roots: Any) -> Any:
        try:
            return orig(payload, allowed, roots)
        except CommandError as exc:
            if (exc.code == "computer_unavailable" and exc.status == 409
                    and payload.get("computer") is not None
                    and payload.get("path") != "/api/computer/capabilities"):
                raise CommandError("runner_feature_unavailable", "no computers here",
                                   409) from None
            raise
    return plan_http


def _active_list_profile(orig: Any) -> Any:
    async def _active_list(self: Any, ch: Any, params: dict[str, Any]) -> Any:
        from runner_ref import allowlists, gateway
        sid = params.get("current_session_id")
        if set(params) == gateway.ACTIVE_LIST_KEYS and isinstance(sid, str) \
                and sid in ch.sessions:   # after the MUST checks of the key set and ownership
            allowlists.require_profile(params.get("profile"), self.allowed_profiles)
        return await orig(self, ch, params)
    return _active_list


def _missing_deadline_error(orig: Any) -> Any:
    async def _admit_and_execute(self: Any, cmd: dict[str, Any], epoch: str) -> Any:
        at = cmd.get("expiresAt")
        if not isinstance(at, int | float) or isinstance(at, bool):
            return error_result(codes.RUNNER_ERROR, "command has no deadline")
        return await orig(self, cmd, epoch)
    return _admit_and_execute


CONTROLS: tuple[Control, ...] = (
    Control("refuses-missing-profile", "choice",
            "What a runner does with a command that names none is an implementation choice",
            "reads a command naming no profile as `default`",
            "refuses it with runner_profile_forbidden (as requireProfile on `undefined` may)",
            one("runner_ref.allowlists:require_profile", _profile_required, rebind=True)),
    Control("extension-kind-unknown", "choice",
            "a core runner MAY answer `runner_command_unknown` (400), as upstream's core would",
            "answers an extension kind 409 runner_feature_unavailable",
            "answers an extension kind 400 runner_command_unknown",
            one("runner_ref.poll_loop:EXTENSION_KINDS", lambda _o: frozenset())),
    Control("search-query-form-only", "choice",
            "Accepting other forms is an implementation choice",
            "accepts a search without the leading `?` (`profile=default`)",
            "refuses a non-empty search that does not begin with `?` (runner_error)",
            one("runner_ref.http_plan:parse_search", _query_form_only)),
    Control("computer-target-feature-code", "choice",
            "for a `computer` target on another path the code is an implementation choice",
            "409 computer_unavailable",
            "409 runner_feature_unavailable",
            one("runner_ref.http_plan:plan_http", _computer_other_path, rebind=True)),
    Control("too-large-other-code", "choice",
            "A Hermes body over 8 MiB MUST be answered with an error result [cases: LIM-003]. "
            "Its code is an implementation choice",
            "502 hermes_response_too_large",
            "502 runner_response_too_large",
            one("runner_ref.codes:HERMES_RESPONSE_TOO_LARGE",
                _code("runner_response_too_large", 502, "response too large"))),
    Control("relays-content-type-only", "choice",
            "Which other headers are relayed is an implementation choice",
            "relays content-type, content-disposition, cache-control, etag, last-modified",
            "relays content-type only",
            one("runner_ref.http_kind:PASSED_HEADERS", lambda _o: ("content-type",))),
    Control("hermes-unavailable-other-code", "choice",
            "(reference runner: 502 `hermes_unavailable`, 502 `hermes_auth_failed`)",
            "502 hermes_unavailable when Hermes is unreachable",
            "502 runner_hermes_unreachable",
            one("runner_ref.codes:HERMES_UNAVAILABLE",
                _code("runner_hermes_unreachable", 502, "Hermes is down"))),
    Control("hermes-auth-other-code", "choice",
            "When Hermes is unreachable or refuses the runner's credentials, the runner MUST "
            "answer the command with an error result [cases: LIM-009]. The codes are",
            "502 hermes_auth_failed when Hermes refuses the credentials",
            "502 runner_hermes_credentials",
            one("runner_ref.codes:HERMES_AUTH_FAILED",
                _code("runner_hermes_credentials", 502, "Hermes refused the login"))),
    Control("strict-connection-id", "choice",
            "Which other strings it refuses as malformed is an implementation choice",
            "accepts any 1..200 chars of [A-Za-z0-9_.:-] as connectionId",
            "refuses every connectionId that is not a lower-case UUID",
            one("runner_ref.gateway:CONNECTION_ID_RE", lambda _o: UUID_LOWER)),
    Control("active-list-profile-checked", "choice",
            "Whether the runner also applies requireProfile to `params.profile` of "
            "`session.active_list`",
            "does not check params.profile of session.active_list",
            "applies requireProfile to it (after the key-set and ownership checks)",
            one("runner_ref.gateway:Gateways._active_list", _active_list_profile)),
    Control("hermes-wait-at-the-edge", "choice",
            "How long the runner waits for a Hermes reply is an implementation choice",
            "waits 25 s for Hermes",
            f"waits {HERMES_WAIT} s, just inside the control plane's 30 s deadline",
            one("runner_ref.timings:HERMES_TIMEOUT", lambda _o: HERMES_WAIT)),
    Control("rpc-error-other-code", "choice",
            "A Hermes JSON-RPC error (`{\"error\":{\"code\",\"message\"}}`) MUST come back as "
            "an error result [cases: LIM-008]. Its code is an implementation choice",
            "hermes_rpc_error with Hermes' message",
            "runner_gateway_error with Hermes' message",
            one("runner_ref.codes:HERMES_RPC_ERROR",
                _code("runner_gateway_error", 502, "Hermes error"))),
    Control("missing-deadline-runner-error", "choice",
            "Its reply is an implementation choice — not tested (the reference runner answers "
            "`runner_command_not_admitted`)",
            "answers a command without a numeric expiresAt runner_command_not_admitted",
            "answers it runner_error (never executed either way)",
            one("runner_ref.poll_loop:PollLoop._admit_and_execute", _missing_deadline_error)),
)
