"""runner.json: loading and validation (protocol 1 §1.1, §1.2, §1.4).

Rules, checked in this order; the first failure is the only message, and no message ever
contains a config value (no token, no password, no URL):
0. (file) mode & 0o077 must be 0 → "config must be readable only by the current user (chmod 600)";
   unreadable or not JSON → "cannot read the node JSON config".
1. schema (strict keys, types, bounds)             → MSG_INVALID
2. serverURL: userinfo/query/fragment/path≠"/"/scheme → MSG_SERVER_URL
3. http serverURL off loopback without allowInsecureLan → MSG_INSECURE
4. hermesURL: userinfo/query/fragment/scheme        → MSG_HERMES_URL
5. satellite: true                                 → MSG_SATELLITE
6. Hermes host not literally 127.0.0.1 or [::1]    → MSG_LOCAL_HERMES
The checks are data (:data:`URL_RULES`) applied by :func:`parse_config`; no I/O except in
:func:`load_config`.
"""
from __future__ import annotations

import ipaddress
import json
import os
import re
import stat
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import SplitResult, urlsplit

from .js_text import js_length, js_trim
from .timings import UUID_RE

MSG_INVALID = "invalid node configuration, check field formats (执行节点配置无效，请检查字段格式)"
MSG_SERVER_URL = "Yaoyao service address invalid"
MSG_INSECURE = "remote nodes need HTTPS or explicit trusted-LAN HTTP"
MSG_HERMES_URL = "Hermes address invalid"
MSG_SATELLITE = "satellite node retired"
MSG_LOCAL_HERMES = "Runner must connect to local Hermes"
MSG_MODE = "config must be readable only by the current user (chmod 600)"
MSG_UNREADABLE = "cannot read the node JSON config"

DEFAULT_HERMES_URL = "http://127.0.0.1:9119"
TOP_KEYS = frozenset({
    "protocol", "serverURL", "runnerId", "token", "hermesURL", "satellite", "allowedProfiles",
    "artifactRoots", "browser", "computers", "allowInsecureLan", "hermesCredentials",
})
REQUIRED_KEYS = frozenset({"protocol", "serverURL", "runnerId", "token", "allowedProfiles"})
BROWSER_KEYS = frozenset({"enabled", "maxSessions", "idleTimeoutMs"})
COMPUTER_KEYS = frozenset({
    "managedBy", "network", "runtime", "imageId", "python", "hermesSource", "hermesHome",
    "maxConcurrent",
})
CREDENTIAL_KEYS = frozenset({"username", "password"})
IMAGE_RE = re.compile(r"^sha256:[0-9a-f]{64}$")
PROFILE_BAD_RE = re.compile(r"[/\\\x00-\x1f]")
SERVER_LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "[::1]"})
HERMES_LOOPBACK_HOSTS = frozenset({"127.0.0.1", "[::1]"})


class ConfigError(Exception):
    """A config rule failed; ``str(err)`` is safe to print (it never holds a config value)."""


@dataclass(frozen=True)
class HermesCredentials:
    username: str
    password: str = field(repr=False)


@dataclass(frozen=True)
class RunnerConfig:
    server_url: str          # normalised: no trailing slash, localhost → 127.0.0.1
    runner_id: str
    token: str = field(repr=False)
    hermes_url: str = DEFAULT_HERMES_URL
    allowed_profiles: tuple[str, ...] = ()
    artifact_roots: tuple[str, ...] = ()
    browser_enabled: bool = True
    computers: dict[str, Any] | None = None
    allow_insecure_lan: bool = False
    hermes_credentials: HermesCredentials | None = None


# ---- schema (rule 1) -------------------------------------------------------------------

def _is_int(v: Any) -> bool:
    return (isinstance(v, int) and not isinstance(v, bool)) or (isinstance(v, float) and v.is_integer())


def _str_len(v: Any, lo: int, hi: int) -> bool:
    return isinstance(v, str) and lo <= len(v) <= hi


def _parse_url(v: Any) -> SplitResult | None:
    """A URL in the WHATWG sense: scheme and host present, port in range."""
    if not isinstance(v, str) or not v or any(c.isspace() for c in v):
        return None
    try:
        u = urlsplit(v)
        _ = u.port
    except ValueError:
        return None
    if not re.fullmatch(r"[A-Za-z][A-Za-z0-9+.-]*", u.scheme or ""):
        return None
    if u.scheme.lower() in ("http", "https") and not u.hostname:
        return None
    return u


def _profiles_ok(v: Any) -> bool:
    if not isinstance(v, list) or not 1 <= len(v) <= 256:
        return False
    for p in v:
        if not isinstance(p, str):
            return False
        t = js_trim(p)
        if not 1 <= js_length(t) <= 256 or PROFILE_BAD_RE.search(t):
            return False
    return True


def _roots_ok(v: Any) -> bool:
    return isinstance(v, list) and len(v) <= 64 and all(
        isinstance(p, str) and p != "" and "\x00" not in p and os.path.isabs(p) for p in v)


def _browser_ok(v: Any) -> bool:
    if not isinstance(v, dict) or not set(v) <= BROWSER_KEYS:
        return False
    if "enabled" in v and not isinstance(v["enabled"], bool):
        return False
    if "maxSessions" in v and not (_is_int(v["maxSessions"]) and 1 <= v["maxSessions"] <= 8):
        return False
    return "idleTimeoutMs" not in v or (
        _is_int(v["idleTimeoutMs"]) and 60000 <= v["idleTimeoutMs"] <= 7200000)


def _abs_or_empty(v: Any) -> bool:
    return isinstance(v, str) and (v == "" or os.path.isabs(v))


def _computers_ok(v: Any) -> bool:
    if not isinstance(v, dict) or not set(v) <= COMPUTER_KEYS:
        return False
    if "managedBy" in v and v["managedBy"] != "compose":
        return False
    if "network" in v and v["network"] not in ("none", "public-proxy"):
        return False
    if v.get("runtime") not in ("docker", "podman"):
        return False
    if not isinstance(v.get("imageId"), str) or not IMAGE_RE.match(v["imageId"]):
        return False
    if any(k in v and not _abs_or_empty(v[k]) for k in ("python", "hermesSource", "hermesHome")):
        return False
    return "maxConcurrent" not in v or (_is_int(v["maxConcurrent"]) and 1 <= v["maxConcurrent"] <= 8)


def _credentials_ok(v: Any) -> bool:
    return (isinstance(v, dict) and set(v) == CREDENTIAL_KEYS
            and _str_len(v["username"], 1, 256) and _str_len(v["password"], 1, 4096))


FIELD_CHECKS: dict[str, Callable[[Any], bool]] = {
    "protocol": lambda v: _is_int(v) and v == 1,
    "serverURL": lambda v: _parse_url(v) is not None,
    "runnerId": lambda v: isinstance(v, str) and bool(UUID_RE.match(v)),
    "token": lambda v: _str_len(v, 32, 4096),
    "hermesURL": lambda v: _parse_url(v) is not None,
    "satellite": lambda v: isinstance(v, bool),
    "allowedProfiles": _profiles_ok,
    "artifactRoots": _roots_ok,
    "browser": _browser_ok,
    "computers": _computers_ok,
    "allowInsecureLan": lambda v: isinstance(v, bool),
    "hermesCredentials": _credentials_ok,
}


def _schema_ok(raw: Any) -> bool:
    if not isinstance(raw, dict) or not set(raw) <= TOP_KEYS or not REQUIRED_KEYS <= set(raw):
        return False
    return all(FIELD_CHECKS[k](v) for k, v in raw.items())


# ---- URL rules (rules 2-6), as data ------------------------------------------------------

def _host(u: SplitResult) -> str:
    """The host as a WHATWG URL serializes it (lowercase, IPv6 bracketed and compressed)."""
    h = (u.hostname or "").lower()
    if ":" in h:
        try:
            return f"[{ipaddress.IPv6Address(h).compressed}]"
        except ValueError:
            return f"[{h}]"
    return h


def _bad_server_url(raw: dict[str, Any]) -> bool:
    u = urlsplit(raw["serverURL"])
    return (u.scheme.lower() not in ("http", "https") or u.username is not None
            or u.password is not None or "@" in u.netloc or bool(u.query) or bool(u.fragment)
            or "?" in raw["serverURL"] or "#" in raw["serverURL"] or u.path not in ("", "/"))


def _insecure(raw: dict[str, Any]) -> bool:
    u = urlsplit(raw["serverURL"])
    return (u.scheme.lower() == "http" and _host(u) not in SERVER_LOOPBACK_HOSTS
            and raw.get("allowInsecureLan") is not True)


def _hermes(raw: dict[str, Any]) -> SplitResult:
    return urlsplit(raw.get("hermesURL", DEFAULT_HERMES_URL))


def _bad_hermes_url(raw: dict[str, Any]) -> bool:
    u = _hermes(raw)
    text = raw.get("hermesURL", DEFAULT_HERMES_URL)
    return (u.scheme.lower() not in ("http", "https") or "@" in u.netloc or bool(u.query)
            or bool(u.fragment) or "?" in text or "#" in text)


URL_RULES: tuple[tuple[Callable[[dict[str, Any]], bool], str], ...] = (
    (_bad_server_url, MSG_SERVER_URL),
    (_insecure, MSG_INSECURE),
    (_bad_hermes_url, MSG_HERMES_URL),
    (lambda raw: raw.get("satellite") is True, MSG_SATELLITE),
    (lambda raw: _host(_hermes(raw)) not in HERMES_LOOPBACK_HOSTS, MSG_LOCAL_HERMES),
)


def _normal_server_url(text: str) -> str:
    u = urlsplit(text)
    host = _host(u)
    if host == "localhost":
        host = "127.0.0.1"
    port = f":{u.port}" if u.port is not None else ""
    return f"{u.scheme.lower()}://{host}{port}"


def _normal_hermes_url(text: str) -> str:
    u = urlsplit(text)
    port = f":{u.port}" if u.port is not None else ""
    return f"{u.scheme.lower()}://{_host(u)}{port}{u.path.rstrip('/')}"


def parse_config(raw: Any) -> RunnerConfig:
    """Validate a decoded runner.json (rules 1-6 in order) → :class:`RunnerConfig`."""
    if not _schema_ok(raw):
        raise ConfigError(MSG_INVALID)
    for failed, message in URL_RULES:
        if failed(raw):
            raise ConfigError(message)
    creds = raw.get("hermesCredentials")
    return RunnerConfig(
        server_url=_normal_server_url(raw["serverURL"]),
        runner_id=raw["runnerId"],
        token=raw["token"],
        hermes_url=_normal_hermes_url(raw.get("hermesURL", DEFAULT_HERMES_URL)),
        allowed_profiles=tuple(js_trim(p) for p in raw["allowedProfiles"]),
        artifact_roots=tuple(raw.get("artifactRoots", [])),
        browser_enabled=raw.get("browser", {}).get("enabled", True) is not False,
        computers=raw.get("computers"),
        allow_insecure_lan=raw.get("allowInsecureLan") is True,
        hermes_credentials=HermesCredentials(creds["username"], creds["password"]) if creds else None,
    )


def load_config(path: str) -> RunnerConfig:
    """Mode check, read, decode, then :func:`parse_config`. Raises :class:`ConfigError`."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        raise ConfigError(MSG_UNREADABLE) from None
    if sys.platform != "win32" and stat.S_IMODE(mode) & 0o077:
        raise ConfigError(MSG_MODE)
    try:
        with open(path, encoding="utf-8") as f:
            raw = json.load(f)
    except (OSError, ValueError):
        raise ConfigError(MSG_UNREADABLE) from None
    return parse_config(raw)
