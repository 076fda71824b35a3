"""Positive controls of the config file, the command line, the state directory and the output
(docs/protocol.md §1, §2.1): each row takes one choice the docs leave open the other way.

Each replacement is built from the original (see :mod:`positive_controls.control`), so the
runner stays the reference runner apart from the one choice.
"""
from __future__ import annotations

import os
import socket
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from runner_ref.config import MSG_INVALID, ConfigError

from .control import Control, one

URL_BOUND = 2048


def _empty_credentials_ok(orig: dict[str, Any]) -> dict[str, Any]:
    def ok(v: Any) -> bool:
        return (isinstance(v, dict) and set(v) == {"username", "password"}
                and isinstance(v["username"], str) and len(v["username"]) <= 256
                and isinstance(v["password"], str) and len(v["password"]) <= 4096)
    return {**orig, "hermesCredentials": ok}


def _refusing(test: Any) -> Any:
    """A ``parse_config`` that first refuses a raw dict ``test`` flags (rule 1's message)."""
    def make(orig: Any) -> Any:
        def parse_config(raw: Any) -> Any:
            if isinstance(raw, dict) and test(raw):
                raise ConfigError(MSG_INVALID)
            return orig(raw)
        return parse_config
    return make


def _upper_runner_id(raw: dict[str, Any]) -> bool:
    rid = raw.get("runnerId")
    return isinstance(rid, str) and rid != rid.lower()


def _long_url(raw: dict[str, Any]) -> bool:
    return any(isinstance(raw.get(k), str) and len(raw[k]) > URL_BOUND
               for k in ("serverURL", "hermesURL"))


def _hermes_path(raw: dict[str, Any]) -> bool:
    url = raw.get("hermesURL")
    if not isinstance(url, str):
        return False
    try:
        return urlsplit(url).path not in ("", "/")
    except ValueError:
        return False


def _canonical_ipv4(url: Any) -> Any:
    """``http://127.1:9`` → ``http://127.0.0.1:9`` (WHATWG's IPv4 shorthand), else unchanged."""
    if not isinstance(url, str):
        return url
    try:
        u = urlsplit(url)
        host = u.hostname or ""
        if not host or not all(part.isdigit() for part in host.split(".")):
            return url
        canonical = socket.inet_ntoa(socket.inet_aton(host))
    except (ValueError, OSError):
        return url
    if canonical == host:
        return url
    netloc = canonical + (f":{u.port}" if u.port is not None else "")
    return urlunsplit((u.scheme, netloc, u.path, u.query, u.fragment))


def _accept_shorthand(orig: Any) -> Any:
    def parse_config(raw: Any) -> Any:
        if isinstance(raw, dict):
            raw = {**raw, **{k: _canonical_ipv4(raw[k]) for k in ("serverURL", "hermesURL")
                             if k in raw}}
        return orig(raw)
    return parse_config


def _two_args_absolute(orig: Any) -> Any:
    def parse_args(argv: list[str]) -> str | None:
        if len(argv) == 2 and argv[0] == "--config" and os.path.isabs(argv[1]):
            return argv[1]
        return None   # neither `--config=<path>` nor a relative path
    return parse_args


def _stopped_after_unauthorized(orig: Any) -> Any:
    async def run(self: Any) -> int:
        code: int = await orig(self)
        if code == 1:
            from runner_ref import status
            status.emit(status.STOPPED)
        return code
    return run


def _every_status(orig: Any) -> Any:
    def _status(self: Any, message: str) -> None:
        from runner_ref import status
        self._last_status = message
        status.emit(message)   # printed again even when unchanged
    return _status


def _upstream_features(orig: Any) -> Any:
    return lambda browser_enabled: ("execution-context-v1,workspace-memory-bind-v1,"
                                    "credential-ref-v1")


CONTROLS: tuple[Control, ...] = (
    Control("accepts-empty-credentials", "choice",
            "Whether an empty username or password is accepted is an implementation choice",
            "refuses an empty hermesCredentials username or password (bounds 1..256, 1..4096)",
            "accepts an empty username and password",
            one("runner_ref.config:FIELD_CHECKS", _empty_credentials_ok)),
    Control("refuses-upper-case-runner-id", "choice",
            "whether the runner refuses an upper-case `runnerId` at load time",
            "accepts an upper-case runnerId and uses it as given",
            "refuses a runnerId with an upper-case letter at load time (rule 1)",
            one("runner_ref.config:parse_config", _refusing(_upper_runner_id), rebind=True)),
    Control("bounds-url-length", "choice",
            "A length bound on URLs beyond what the URL parser imposes",
            "no length bound of its own on serverURL / hermesURL",
            f"refuses a serverURL or hermesURL over {URL_BOUND} chars (rule 1)",
            one("runner_ref.config:parse_config", _refusing(_long_url), rebind=True)),
    Control("accepts-ipv4-shorthand", "choice",
            "how a runner treats non-canonical spellings such as `127.1`",
            "compares the raw host: `127.1` is not loopback (refused for Hermes, insecure for "
            "the server)",
            "canonicalises IPv4 shorthand as WHATWG does (`127.1` is 127.0.0.1)",
            one("runner_ref.config:parse_config", _accept_shorthand, rebind=True)),
    Control("refuses-hermes-url-path", "choice",
            "A path in `hermesURL` is an implementation choice",
            "accepts a path in hermesURL and prefixes every Hermes request with it",
            "refuses a hermesURL whose path is not empty or `/` (rule 1)",
            one("runner_ref.config:parse_config", _refusing(_hermes_path), rebind=True)),
    Control("config-two-args-only", "choice",
            "relative paths and the form `--config=<path>` are an implementation choice",
            "accepts `--config=<path>` and relative paths",
            "accepts only `--config <absolute path>` (usage error otherwise)",
            one("runner_ref.__main__:parse_args", _two_args_absolute)),
    Control("other-version-string", "choice",
            "`version` is the runner's own version string",
            "writes version 1.0.0 into service-instance.json",
            "writes version 0.0.0-positive-control+build.7",
            one("runner_ref.statedir:VERSION", lambda _o: "0.0.0-positive-control+build.7")),
    Control("prints-stopped-after-unauthorized", "choice",
            "Printing \"stopped\" then is an implementation choice",
            "prints the server's text only after runner_unauthorized",
            "prints the server's text, then \"stopped\"",
            one("runner_ref.poll_loop:PollLoop.run", _stopped_after_unauthorized)),
    Control("repeats-status-lines", "choice",
            "Printing an unchanged status again during an outage is an implementation choice",
            "prints a status line only when the status changes",
            "prints the status line again on every failed poll",
            one("runner_ref.poll_loop:PollLoop._status", _every_status)),
    Control("upstream-features", "choice",
            "Which features a core runner advertises is an implementation choice",
            "advertises execution-context-v1,workspace-memory-bind-v1,"
            "managed-browser-disabled-v1,credential-ref-v1",
            "advertises execution-context-v1,workspace-memory-bind-v1,credential-ref-v1 "
            "(no browser feature at all)",
            one("runner_ref.machine_client:features_header", _upstream_features, rebind=True)),
    Control("other-ledger-file", "choice",
            "the file name, schema and encoding are an implementation choice",
            "keeps the ledger in runner-commands.sqlite3",
            "keeps the ledger in ledger.positive.db",
            one("runner_ref.statedir:LEDGER_FILE", lambda _o: "ledger.positive.db")),
)
