"""Negative controls of the machine-API side: wire basics and admission (reconnection and
generations: :mod:`negative_controls.controls_reconnection`).

Each row patches one seam of ``runner_ref`` (see :mod:`negative_controls.control`). The
replacement builders take the original so that everything but the one bug stays the reference.
"""
from __future__ import annotations

import asyncio
import sys
import types
import uuid
from typing import Any

from runner_ref.errors import ServerError
from runner_ref.ledger import NOT_ADMITTED, Gate

from .control import Control, const


# -- admission ------------------------------------------------------------------------------
def _skip_admit(_orig: Any) -> Any:
    async def _admit_gate(self: Any, cmd: dict[str, Any], epoch: str) -> bool:
        return True   # never asks the control plane
    return _admit_gate


def _ignore_allowed(_orig: Any) -> Any:
    async def _admit_gate(self: Any, cmd: dict[str, Any], epoch: str) -> bool:
        try:
            await self.machine.post("admit", {"id": cmd["id"]}, epoch=epoch)
        except ServerError:
            return False
        return True   # any 2xx is taken as a grant; {"allowed": false} is not read
    return _admit_gate


def _admit_in_parallel(_orig: Any) -> Any:
    async def _admit_and_execute(self: Any, cmd: dict[str, Any], epoch: str) -> Any:
        if not await self.gate_checks[Gate.DEADLINE](cmd, epoch):
            return NOT_ADMITTED
        admit = asyncio.ensure_future(self.gate_checks[Gate.ADMIT](cmd, epoch))
        run = asyncio.ensure_future(self.execute(cmd.get("kind"), cmd.get("payload"), epoch))
        if not await admit:   # optimistic: the work already started
            run.cancel()
            return NOT_ADMITTED
        return await run
    return _admit_and_execute


# -- the machine client ---------------------------------------------------------------------
def _no_reset(orig: Any) -> Any:
    async def poll(self: Any, reset: bool) -> Any:
        return await orig(self, False)
    return poll


def _upper_instance(orig: Any) -> Any:
    def __init__(self: Any, server_url: str, runner_id: str, token: str, instance_id: str,
                 features: str) -> None:
        orig(self, server_url, runner_id, token, instance_id.upper(), features)
    return __init__


def _sends_origin(orig: Any) -> Any:
    def __init__(self: Any, *args: Any) -> None:
        orig(self, *args)
        origin = self._base.split("/api/", 1)[0]
        for headers in (self._headers, *self._poll_headers.values()):
            headers["Origin"] = origin
    return __init__


def _first_command_only(orig: Any) -> Any:
    async def poll(self: Any, reset: bool) -> Any:
        body = await orig(self, reset)
        body["commands"] = body.get("commands", [])[:1]
        return body
    return poll


def _private_feature(orig: Any) -> Any:
    return lambda browser_enabled: orig(browser_enabled) + ",x-vendor-fast-path-v1"


def _prints_token(orig: Any) -> Any:
    async def poll(self: Any, reset: bool) -> Any:
        if not getattr(self, "_nc_logged", False):
            self._nc_logged = True
            sys.stderr.write(f"debug: GET {self._base}poll headers={self._poll_headers[reset]}\n")
            sys.stderr.flush()
        return await orig(self, reset)
    return poll


def _stable_instance(_orig: Any) -> Any:
    def uuid4() -> uuid.UUID:   # "persisted" per config: the same id after every restart
        return uuid.uuid5(uuid.NAMESPACE_URL, "negative-controls:" + " ".join(sys.argv))
    return types.SimpleNamespace(uuid4=uuid4)


# -- the poll loop --------------------------------------------------------------------------
def _serial(_orig: Any) -> Any:
    def _spawn(self: Any, cmd: Any, epoch: str) -> None:
        if not isinstance(cmd, dict) or not isinstance(cmd.get("id"), str):
            return
        cid = cmd["id"]
        if cid in self._handling:
            return
        self._handling.add(cid)
        before = getattr(self, "_nc_last", None)

        async def one_after_another() -> None:
            if before is not None:
                await asyncio.gather(before, return_exceptions=True)
            await self._deliver(cmd, epoch)

        task = asyncio.create_task(one_after_another())
        self._nc_last = task
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
    return _spawn


PL = "runner_ref.poll_loop:PollLoop"
MC = "runner_ref.machine_client:MachineClient"

# -- redirects, error codes, deadlines ------------------------------------------------------
def _sticky_reset(orig: Any) -> Any:
    async def poll(self: Any, reset: bool) -> Any:
        return await orig(self, True)   # the reset flag is never cleared
    return poll


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


CONTROLS: tuple[Control, ...] = (
    Control("skip-admit", "wire", "Executes every delivered command without asking admit.",
            "a runner that trusts delivery as permission (admission added late, then skipped)",
            f"{PL}._admit_gate", ("WIR-006", "WIR-007", "REC-005", "PROP-001"), _skip_admit),
    Control("ignore-admit-false", "wire",
            "Posts admit but takes any 2xx answer as a grant, never reading allowed:false.",
            "status-code-only checks of a JSON verdict; revoked work keeps running",
            f"{PL}._admit_gate", ("WIR-007", "CAN-009", "CAN-010", "PROP-006"), _ignore_allowed),
    Control("admit-in-parallel", "wire",
            "Starts executing while the admit request is still in flight.",
            "optimistic execution to save a round trip; the effect precedes the grant",
            f"{PL}._admit_and_execute", ("WIR-006",), _admit_in_parallel),
    Control("no-deadline-check", "wire", "Never compares expiresAt with the clock.",
            "stale jobs run after a long outage (queued CI jobs starting hours late)",
            "runner_ref.poll_loop:deadline_ok", ("WIR-010",),
            const(lambda expires_at, now_ms: True)),
    Control("no-reset-header", "wire", "Never sends x-runner-reset: 1, not even on the first poll.",
            "a client that omits the restart signal, so the server keeps stale channels",
            f"{MC}.poll", ("WIR-001",), _no_reset),
    Control("upper-case-instance", "wire", "Sends the instance id in upper case.",
            "a UUID library formatting upper case (Windows GUIDs); the server compares strings",
            f"{MC}.__init__", ("WIR-002",), _upper_instance),
    Control("sends-origin", "wire", "Adds an Origin header to every machine-API request.",
            "a runner built on a browser-style fetch that always sends Origin",
            f"{MC}.__init__", ("WIR-003",), _sends_origin),
    Control("stable-instance-id", "wire",
            "Derives the instance id from its config, so a restart reuses it.",
            "an instance id persisted on disk: the new process impersonates the old one",
            "runner_ref.__main__:uuid", ("WIR-005",), _stable_instance),
    Control("serial-commands", "wire", "Runs the commands one at a time, in delivery order.",
            "a for-await loop over the batch: one slow job blocks every other (head-of-line)",
            f"{PL}._spawn", ("WIR-009", "CAN-002"), _serial),
    Control("first-command-only", "wire", "Handles only the first command of a poll answer.",
            "code written for a single-command response (commands[0])",
            f"{MC}.poll", ("WIR-011",), _first_command_only),
    Control("private-feature", "wire",
            "Advertises a vendor feature name that protocol 1 does not define.",
            "advertising private or future features the control plane may act on",
            "runner_ref.poll_loop:features_header", ("WIR-012",), _private_feature),
    Control("prints-token", "secrets",
            "Logs its first poll request with the headers, bearer token included.",
            "debug request logging left on (tokens in CI logs)",
            f"{MC}.poll", ("SEC-001", "CFG-001"), _prints_token),
    Control("reset-on-every-poll", "wire",
            "Sends x-runner-reset: 1 on every poll (the reset flag is never cleared).",
            "a sticky reconnect flag: every poll drops the online state and its channels",
            "runner_ref.machine_client:MachineClient.poll", ("WIR-901",), _sticky_reset),
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
    Control("uncapped-error-text", "wire",
            "Puts an error's whole text into the error result (no 1000-char cap).",
            "an upstream's (Hermes') error text forwarded as it came: unbounded result bodies",
            "runner_ref.timings:ERROR_TEXT_CAP", ("WIR-906",), const(10 ** 9), rebind=True),
    Control("keep-alive-websocket", "wire",
            "Keeps HTTP connections to Hermes alive, so a gateway WebSocket is upgraded on a "
            "connection that just carried an HTTP request.",
            "an HTTP client's default connection pool: against Hermes 0.19.0 (uvicorn) the "
            "finished request's keep-alive timer can close the WebSocket 5 s after it opened — "
            "the reference runner lost real first turns this way",
            "runner_ref.hermes:KEEP_ALIVE", ("WIR-907",), const(True)),
)
