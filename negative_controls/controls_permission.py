"""Negative controls of the permission intersection and of secrets (protocol 1 §1, §3)."""
from __future__ import annotations

import base64
import json
import os
from typing import Any

from runner_ref import codes
from runner_ref.allowlists import CLEANUP_METHODS, RPC_METHODS
from runner_ref.config import ConfigError
from runner_ref.errors import CommandError
from runner_ref.http_plan import plan_http

from .control import Control


def _forbidden() -> CommandError:
    return CommandError.of(codes.ARTIFACT_FORBIDDEN)


# -- artifact roots -------------------------------------------------------------------------
def _no_realpath(orig: Any) -> Any:
    def contained_path(requested: object, roots: Any) -> str:
        if not roots or not isinstance(requested, str) or not os.path.isabs(requested):
            raise _forbidden()
        if ".." in requested.split("/"):
            raise _forbidden()
        path = os.path.normpath(requested)   # normalised, but links are not resolved
        if not os.path.isfile(path):
            raise _forbidden()
        for root in roots:
            base = os.path.normpath(root)
            if os.path.commonpath([base, path]) == base and path != base:
                return path
        raise _forbidden()
    return contained_path


def _string_prefix(orig: Any) -> Any:
    def contained_path(requested: object, roots: Any) -> str:
        if not roots or not isinstance(requested, str) or not os.path.isabs(requested):
            raise _forbidden()
        if not os.path.isfile(requested):
            raise _forbidden()
        if any(requested.startswith(root.rstrip("/") + "/") for root in roots):
            return requested   # checked before normalising: root/../../etc/passwd passes
        raise _forbidden()
    return contained_path


def _empty_allows_all(orig: Any) -> Any:
    def contained_path(requested: object, roots: Any) -> str:
        if not roots and isinstance(requested, str) and os.path.isfile(requested):
            return os.path.realpath(requested)   # "no roots configured" read as "no limit"
        return orig(requested, roots)   # type: ignore[no-any-return]
    return contained_path


# -- HTTP -----------------------------------------------------------------------------------
def _relay_method(orig: Any) -> Any:
    async def run_http(payload: dict[str, Any], hermes: Any, allowed_profiles: tuple[str, ...],
                       artifact_roots: tuple[str, ...]) -> dict[str, Any]:
        method = payload.get("method") if isinstance(payload.get("method"), str) else "GET"
        path, query = plan_http({**payload, "method": "GET"}, allowed_profiles, artifact_roots)
        status, headers, body = await hermes.request(method, path, params=query or None)
        passed = ("content-type", "content-disposition", "cache-control", "etag",
                  "last-modified")
        return {"status": status, "headers": {k: headers[k] for k in passed if k in headers},
                "body": base64.b64encode(body).decode("ascii")}
    return run_http


def _all_headers(orig: Any) -> Any:
    async def run_http(payload: dict[str, Any], hermes: Any, allowed_profiles: tuple[str, ...],
                       artifact_roots: tuple[str, ...]) -> dict[str, Any]:
        path, query = plan_http(payload, allowed_profiles, artifact_roots)
        status, headers, body = await hermes.request("GET", path, params=query or None)
        return {"status": status, "headers": dict(headers),   # Set-Cookie and all
                "body": base64.b64encode(body).decode("ascii")}
    return run_http


def _any_path(orig: Any) -> Any:
    def http_route(method: object, path: object) -> tuple[str, bool]:
        try:
            return orig(method, path)   # type: ignore[no-any-return]
        except CommandError:
            if method == "GET" and isinstance(path, str) and path.startswith("/"):
                return "proxied", False   # a read-only proxy: "GET is harmless"
            raise
    return http_route


def _unchecked_profile(orig: Any) -> Any:
    def require_profile(profile: object, allowed: Any) -> str:
        return "default" if profile is None else str(profile).strip()
    return require_profile


# -- gateway methods ------------------------------------------------------------------------
def _any_rpc(orig: Any) -> Any:
    def check_rpc_method(method: object, cleanup_only: bool) -> str:
        if isinstance(method, str) and method not in RPC_METHODS:
            if cleanup_only and method not in CLEANUP_METHODS:
                raise CommandError.of(codes.CLEANUP_FORBIDDEN)
            return method   # a deny-list mindset: unknown methods pass
        return orig(method, cleanup_only)   # type: ignore[no-any-return]
    return check_rpc_method


def _cleanup_ignored(orig: Any) -> Any:
    return lambda method, cleanup_only: orig(method, False)


def _active_list_unfiltered(orig: Any) -> Any:
    async def _active_list(self: Any, ch: Any, params: dict[str, Any]) -> Any:
        sid = params.get("current_session_id")
        if set(params) != {"profile", "current_session_id"} or sid not in ch.sessions:
            raise CommandError.of(codes.SESSION_FORBIDDEN)
        return await ch.call("session.active_list", params)   # Hermes' whole list
    return _active_list


# -- secrets --------------------------------------------------------------------------------
def _config_echo(orig: Any) -> Any:
    def parse_config(raw: Any) -> Any:
        try:
            return orig(raw)
        except ConfigError as exc:   # validation errors that quote their input (pydantic-style)
            raise ConfigError(f"{exc} (input: {json.dumps(raw, default=str)[:2000]})") from None
    return parse_config


def _login_quoted(orig: Any) -> Any:
    async def _login(self: Any) -> None:
        try:
            await orig(self)
        except CommandError as exc:
            creds = self._credentials
            if creds is None or exc.code != codes.HERMES_AUTH_FAILED.code:
                raise
            body = {"provider": "basic", "username": creds.username, "password": creds.password}
            raise CommandError.of(codes.HERMES_AUTH_FAILED,
                                  f"Hermes login refused for {json.dumps(body)}") from None
    return _login


def _lease_reveals_token(orig: Any) -> Any:
    async def create(self: Any, payload: dict[str, Any]) -> dict[str, Any]:
        result: dict[str, Any] = await orig(self, payload)
        lease = self.lease(payload.get("leaseId"))
        if lease is not None:   # "handy for debugging": the bridge details in the result
            result = {**result, "bridgeUrl": lease.listener.url, "token": lease.listener.token}
        return result
    return create


# -- the Hermes session token, child processes, computer targets ----------------------------
def _token_cache(orig: Any) -> Any:
    async def _read_page_token(self: Any) -> None:
        await orig(self)
        with open("hermes-token.cache", "w", encoding="utf-8") as f:  # noqa: ASYNC230 - the bug
            f.write(self._token or "")
    return _read_page_token


def _unvalidated_token(orig: Any) -> Any:
    from runner_ref import status, timings
    from runner_ref.hermes import _auth_failed, token_from_page

    async def _read_page_token(self: Any) -> None:
        st, _, page = await self._raw("GET", "/", auth=False, cap=timings.HERMES_PAGE_CAP)
        token = token_from_page(page.decode("utf-8", "replace")) if st == 200 else None
        if token is None:
            raise _auth_failed()
        self._token = token   # used as read: no GET /api/profiles first
        status.add_secret(token)
        self._account_mode = False
    return _read_page_token


def _without_hermes_url_rule(orig: Any) -> Any:
    from runner_ref.config import MSG_HERMES_URL
    return tuple(rule for rule in orig if rule[1] != MSG_HERMES_URL)


def _helper_with_token(orig: Any) -> Any:
    import os
    import subprocess

    async def _retire_now(self: Any) -> None:
        if getattr(self, "_helper", None) is None:   # a helper process, given the token by env
            self._helper = subprocess.Popen(  # noqa: ASYNC220 - the bug is the helper itself
                ["sleep", "600"], env={**os.environ, "YAOYAO_RUNNER_TOKEN": self.cfg.token},
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        await orig(self)
    return _retire_now


def _status_ignores_computer(orig: Any) -> Any:
    def plan_http(payload: Any, allowed_profiles: Any, artifact_roots: Any) -> Any:
        if isinstance(payload, dict) and payload.get("path") == "/api/status":
            payload = {k: v for k, v in payload.items() if k != "computer"}   # "public anyway"
        return orig(payload, allowed_profiles, artifact_roots)
    return plan_http


# -- an active_list reply without a list ----------------------------------------------------
def _missing_list_is_empty(orig: Any) -> Any:
    async def _active_list(self: Any, ch: Any, params: dict[str, Any]) -> Any:
        try:
            return await orig(self, ch, params)
        except Exception as exc:
            if getattr(exc, "code", None) == "session_stop_unconfirmed":
                return {"sessions": []}   # "no list, so nothing is running"
            raise
    return _active_list


CONTROLS: tuple[Control, ...] = (
    Control("follow-symlinks", "permission",
            "Checks artifactRoots on the normalised path without resolving symlinks.",
            "path checks on the name, not the file: a link inside the root exports /etc",
            "runner_ref.http_plan:contained_path", ("PERM-006",), _no_realpath),
    Control("no-dotdot-normalisation", "permission",
            "Checks artifactRoots as a string prefix of the raw path, before normalising.",
            "classic path traversal (root/../../etc/passwd passes a startswith check)",
            "runner_ref.http_plan:contained_path", ("PERM-007",), _string_prefix),
    Control("empty-roots-allow-all", "permission",
            "Reads artifactRoots [] as 'no restriction' and exports any file.",
            "an empty allowlist taken as allow-all (misconfiguration opens everything)",
            "runner_ref.http_plan:contained_path", ("PERM-008",), _empty_allows_all),
    Control("http-any-method", "permission",
            "Relays the http command with its own method (POST, DELETE …) to Hermes.",
            "a read-only proxy that forwards the method it was given",
            "runner_ref.poll_loop:run_http", ("PERM-002",), _relay_method),
    Control("http-any-path", "permission",
            "Relays a GET of any Hermes path, not only the read-only allowlist.",
            "'GET is harmless': config, env and debug endpoints exported",
            "runner_ref.http_plan:http_route", ("PERM-003",), _any_path),
    Control("http-no-profile-check", "permission",
            "Never checks the profile of a profile-checked HTTP path against allowedProfiles.",
            "a permission check written for one entry point and missed in another",
            "runner_ref.http_plan:require_profile", ("PERM-004", "PROP-001"), _unchecked_profile),
    Control("session-no-profile-check", "permission",
            "session.create/resume accept any profile, not only allowedProfiles.",
            "the gateway path trusting the control plane's profile filter alone",
            "runner_ref.gateway:require_profile", ("PERM-010",), _unchecked_profile),
    Control("rpc-any-method", "permission",
            "Forwards gateway.rpc methods outside the allowlist to Hermes.",
            "a deny-list where an allowlist was needed",
            "runner_ref.gateway:check_rpc_method", ("PERM-009",), _any_rpc),
    Control("cleanup-any-method", "permission",
            "Ignores cleanupOnly: a cleanup channel can submit prompts.",
            "a channel flag stored but never enforced",
            "runner_ref.gateway:check_rpc_method", ("PERM-011",), _cleanup_ignored),
    Control("active-list-unfiltered", "permission",
            "Returns Hermes' whole session list for session.active_list.",
            "an over-broad listing leaking other tenants' sessions",
            "runner_ref.gateway:Gateways._active_list", ("PERM-012",), _active_list_unfiltered),
    Control("config-error-echoes-input", "secrets",
            "A refused config's error message quotes the whole config, token included.",
            "validation errors that echo their input (secrets in logs)",
            "runner_ref.config:parse_config", ("SEC-002", "CFG-002"), _config_echo),
    Control("auth-error-quotes-login", "secrets",
            "A refused Hermes login is reported with the login body, password included.",
            "an error message built from the request it failed on",
            "runner_ref.hermes:HermesClient._login", ("SEC-003",), _login_quoted),
    Control("relays-all-headers", "secrets",
            "Relays every Hermes response header, Set-Cookie included.",
            "a transparent proxy passing session cookies to a remote party",
            "runner_ref.poll_loop:run_http", ("SEC-004",), _all_headers),
    Control("lease-result-reveals-token", "secrets",
            "Answers lease.create with the listener URL and its bearer token.",
            "debug details in a result: the bridge token reaches the control plane",
            "runner_ref.teamtools.leases:LeaseManager.create", ("SEC-005",),
            _lease_reveals_token),
    Control("session-token-cached-on-disk", "secrets",
            "Writes the Hermes session token to a cache file in its working directory.",
            "a credential cache readable by whoever can read the directory (or a backup)",
            "runner_ref.hermes:HermesClient._read_page_token", ("SEC-901",), _token_cache),
    Control("unvalidated-session-token", "secrets",
            "Uses the token read from Hermes' page without validating it first.",
            "a scraped credential trusted blindly (a wrong page's token sent everywhere)",
            "runner_ref.hermes:HermesClient._read_page_token", ("SEC-902",),
            _unvalidated_token),
    Control("hermes-url-userinfo-accepted", "secrets",
            "Accepts a hermesURL with userinfo (and a query or fragment).",
            "credentials in a URL, silently dropped or sent where they were not meant to go",
            "runner_ref.config:URL_RULES", ("SEC-905",), _without_hermes_url_rule),
    Control("token-in-child-env", "secrets",
            "Starts a helper process with the runner token in its environment.",
            "credentials in a child's environment: readable in /proc, inherited, logged by crash "
            "reporters",
            "runner_ref.poll_loop:PollLoop._retire_now", ("SEC-906",), _helper_with_token),
    Control("computer-status-relayed", "permission",
            "Relays GET /api/status of its own Hermes for a command that targets a computer.",
            "a request meant for another machine answered by this one (wrong-target answers)",
            "runner_ref.http_kind:plan_http", ("PERM-901",), _status_ignores_computer),
    Control("active-list-missing-is-empty", "permission",
            "Reads a session.active_list reply without a list as an empty list.",
            "a lenient parser defaulting a missing field: an unconfirmed stop reported as done",
            "runner_ref.gateway:Gateways._active_list", ("PERM-903",), _missing_list_is_empty),
)
