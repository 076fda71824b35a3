"""Negative controls for the spec-coverage cases (the ``*-9NN`` cases of
``conformance/cases/test_spec_extra*.py``): one realistic bug each, caught by those cases."""
from __future__ import annotations

import asyncio
import contextlib
from types import SimpleNamespace
from typing import Any

from .control import Control, const


def _last_poll_at_stop(orig: Any) -> Any:
    async def _shutdown(self: Any) -> None:
        with contextlib.suppress(Exception):   # "one last poll to pick up what is pending"
            await asyncio.wait_for(self.machine.poll(False), 1.0)
        await orig(self)
    return _shutdown


def _drain_before_disconnect(orig: Any) -> Any:
    from runner_ref import timings

    async def _shutdown(self: Any) -> None:
        if self._tasks:   # drain in-flight work while still "connected": pending admits run
            await asyncio.wait(set(self._tasks), timeout=timings.SHUTDOWN_DRAIN)
        await orig(self)
    return _shutdown


def _sticky_reset(orig: Any) -> Any:
    async def poll(self: Any, reset: bool) -> Any:
        return await orig(self, True)   # the reset flag is never cleared
    return poll


def _idle_backoff(orig: Any) -> Any:
    async def poll(self: Any, reset: bool) -> Any:
        body = await orig(self, reset)
        if isinstance(body, dict) and not body.get("commands"):
            await asyncio.sleep(40.0)   # nothing to do: back off before polling again
        return body
    return poll


def _post_ignoring_errors(orig: Any) -> Any:
    from runner_ref.errors import ServerError

    async def _post(self: Any) -> None:
        while True:
            body = await self._events.get()
            if body is None:
                return
            try:
                await self._registry.post_event(body)
            except ServerError as exc:
                if exc.status == 410 and not body.get("closed"):
                    self._registry.close_later(self.id)
                    return
                # any other failure: the frame is dropped and the channel carries on
    return _post


def _short_token(orig: Any) -> Any:
    return SimpleNamespace(token_urlsafe=lambda nbytes=32: orig.token_urlsafe(8))


def _trust_any_bind(orig: Any) -> Any:
    async def post_json(self: Any, path: str, body: dict[str, Any]) -> tuple[int, Any]:
        status, reply = await orig(self, path, body)
        if path.endswith("/bind") and isinstance(reply, dict) and reply.get("ok") is True:
            reply = {**reply, "native_tools": True}   # ok is taken as "tools available"
        return status, reply
    return post_json


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


def _claim_ignoring_errors(orig: Any) -> Any:
    async def claim(self: Any, command_id: str, fingerprint: str, created_ms: int) -> Any:
        try:
            return await orig(self, command_id, fingerprint, created_ms)
        except Exception:   # noqa: BLE001 - "the ledger is best effort": treated as a new id
            return None
    return claim


def _close_all_forgetting(orig: Any) -> Any:
    async def close_all(self: Any) -> None:
        chans = list(self.channels.values())
        self.channels.clear()   # closed, but their ids are not tombstoned
        await asyncio.gather(*(self._close_tracked(ch) for ch in chans),
                             *list(self._background), return_exceptions=True)
    return close_all


class _Following:
    """A client session whose requests follow redirects, whatever the caller asked."""

    def __init__(self, session: Any) -> None:
        self._session = session

    def request(self, *args: Any, **kwargs: Any) -> Any:
        kwargs["allow_redirects"] = True
        return self._session.request(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._session, name)


def _follows_redirects(orig: Any) -> Any:
    return lambda self: _Following(orig(self))


def _reads_error_text(orig: Any) -> Any:
    from runner_ref import codes
    from runner_ref.errors import ServerError

    async def _request(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return await orig(self, *args, **kwargs)
        except ServerError as exc:
            if "unauthorized" in exc.message.lower():   # matched on the text
                raise ServerError(exc.status, codes.UNAUTHORIZED.code, exc.message) from None
            raise
    return _request


def _no_deadline_means_forever(orig: Any) -> Any:
    def deadline_ok(expires_at: Any, now_ms: int) -> bool:
        if not isinstance(expires_at, int | float) or isinstance(expires_at, bool):
            return True   # "no deadline given": run it
        return bool(orig(expires_at, now_ms))
    return deadline_ok


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


CONTROLS: tuple[Control, ...] = (
    Control("polls-after-stop", "config-process",
            "Sends one more poll during its graceful stop, after the signal.",
            "a shutdown path that keeps taking work (jobs picked up by a dying agent)",
            "runner_ref.poll_loop:PollLoop._shutdown", ("CFG-904",), _last_poll_at_stop),
    Control("runs-commands-admitted-at-stop", "config-process",
            "At a graceful stop, drains pending commands before it stops accepting work, so a "
            "command admitted during the stop is executed.",
            "a job started on a host that is shutting down, then abandoned mid-way",
            "runner_ref.poll_loop:PollLoop._shutdown", ("CFG-905",), _drain_before_disconnect),
    Control("reset-on-every-poll", "wire",
            "Sends x-runner-reset: 1 on every poll (the reset flag is never cleared).",
            "a sticky reconnect flag: every poll drops the online state and its channels",
            "runner_ref.machine_client:MachineClient.poll", ("WIR-901",), _sticky_reset),
    Control("idle-poll-backoff", "reconnection",
            "Waits 40 s after an empty poll answer before polling again.",
            "an idle back-off longer than the watchdog: the runner flaps offline when idle",
            "runner_ref.machine_client:MachineClient.poll", ("REC-901",), _idle_backoff),
    Control("unbounded-close-interrupts", "cancel",
            "gateway.close waits up to 60 s for the interrupt replies before it closes.",
            "a hung dependency blocking cleanup (a close that never completes)",
            "runner_ref.timings:INTERRUPT_WAIT", ("CAN-901",), const(60.0)),
    Control("running-never-cleared", "isolation",
            "Never clears a session's running flag on message.complete.",
            "stale busy state: idle sessions interrupted at every close and stop",
            "runner_ref.gateway_channel:COMPLETION_EVENTS", ("ISO-901",), const(frozenset())),
    Control("event-errors-ignored", "reconnection",
            "Drops a frame whose event post failed (other than 410) and carries on.",
            "silent event loss on a flaky control plane, with no reconnect to resync",
            "runner_ref.gateway:Channel._post", ("REC-902",), _post_ignoring_errors),
    Control("inflight-copy-ignored", "dedupe",
            "Ignores any second delivery of an id it is still running, whatever its payload.",
            "a conflicting request left unanswered until the control plane's deadline",
            "runner_ref.poll_loop:PollLoop._conflicts_in_flight", ("DED-901",),
            const(lambda self, cmd: False)),
    Control("short-lease-token", "team-tools",
            "Mints lease tokens of 8 random bytes.",
            "guessable bearer tokens on a loopback port any local process can reach",
            "runner_ref.teamtools.listener:secrets", ("TT-903",), _short_token),
    Control("bind-ignores-native-tools", "team-tools",
            "Takes any {ok:true} bind answer as bound, without native_tools:true.",
            "tools announced to a Hermes build that cannot serve them (silent no-op tools)",
            "runner_ref.hermes:HermesClient.post_json", ("TT-904",), _trust_any_bind),
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
    Control("ledger-failure-executes", "receipts",
            "Treats a ledger it cannot write as 'no row yet' and executes the command.",
            "best-effort bookkeeping: a locked or full database silently drops the receipt",
            "runner_ref.ledger_store:LedgerStore.claim", ("INC-901",), _claim_ignoring_errors),
    Control("no-tombstone-on-disconnect", "generations",
            "A local disconnect closes its channels without tombstoning their ids.",
            "a late open of an old generation's channel revives it after a reconnect",
            "runner_ref.gateway:Gateways.close_all", ("GEN-902",), _close_all_forgetting),
    Control("follows-redirects", "wire",
            "Its machine-API client follows HTTP redirects.",
            "a redirect (proxy, captive portal, hostile server) sends the token elsewhere",
            "runner_ref.machine_client:MachineClient._http", ("WIR-903",), _follows_redirects),
    Control("acts-on-error-text", "wire",
            "Takes any error whose text mentions 'unauthorized' as runner_unauthorized.",
            "string-matching error messages: a reworded message changes the behaviour",
            "runner_ref.machine_client:MachineClient._request", ("WIR-904",),
            _reads_error_text),
    Control("missing-deadline-runs", "wire",
            "Runs a command whose expiresAt is missing or not a number (no deadline = forever).",
            "a lenient parser turning a malformed deadline into none: stale work runs late",
            "runner_ref.poll_loop:deadline_ok", ("WIR-905",), _no_deadline_means_forever),
    Control("token-in-child-env", "secrets",
            "Starts a helper process with the runner token in its environment.",
            "credentials in a child's environment: readable in /proc, inherited, logged by crash "
            "reporters",
            "runner_ref.poll_loop:PollLoop._retire_now", ("SEC-906",), _helper_with_token),
    Control("computer-status-relayed", "permission",
            "Relays GET /api/status of its own Hermes for a command that targets a computer.",
            "a request meant for another machine answered by this one (wrong-target answers)",
            "runner_ref.http_kind:plan_http", ("PERM-901",), _status_ignores_computer),
)
