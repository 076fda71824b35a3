"""Config rules of protocol 1 §1.2 / §1.4: one test per rule, and their order."""
from __future__ import annotations

import json
import os
from typing import Any

import pytest

from runner_ref import config as C

TOKEN = "T" * 20 + "secret-token-value-xyz"
PASSWORD = "hunter2-password-value"


def base(**patch: Any) -> dict[str, Any]:
    raw: dict[str, Any] = {
        "protocol": 1, "serverURL": "https://yaoyao.example.com",
        "runnerId": "0b3c9a9e-2f51-4a8e-9a43-5e8f8e2f6b1c", "token": TOKEN,
        "hermesURL": "http://127.0.0.1:9119", "allowedProfiles": ["default"], "artifactRoots": [],
    }
    for k, v in patch.items():
        if v is ...:
            raw.pop(k, None)
        else:
            raw[k] = v
    return raw


def fails(raw: Any) -> str:
    with pytest.raises(C.ConfigError) as info:
        C.parse_config(raw)
    msg = str(info.value)
    assert TOKEN not in msg and "password" not in msg.lower() and PASSWORD not in msg
    return msg


def test_minimal_admin_download_parses() -> None:
    cfg = C.parse_config(base())
    assert cfg.server_url == "https://yaoyao.example.com"
    assert cfg.allowed_profiles == ("default",) and cfg.artifact_roots == ()
    assert TOKEN not in repr(cfg)


def test_defaults() -> None:
    cfg = C.parse_config(base(hermesURL=..., artifactRoots=...))
    assert cfg.hermes_url == "http://127.0.0.1:9119" and cfg.browser_enabled


@pytest.mark.parametrize("patch", [
    {"command": "rm -rf /"},                      # strict keys
    {"protocol": 2}, {"protocol": True}, {"protocol": ...},
    {"runnerId": "not-a-uuid"}, {"token": "short"}, {"token": "x" * 4097}, {"token": 5},
    {"serverURL": "not a url"}, {"serverURL": "http://h:99999"}, {"hermesURL": "::"},
    {"allowedProfiles": []}, {"allowedProfiles": ["../default"]}, {"allowedProfiles": ["a\\b"]},
    {"allowedProfiles": ["a\x01"]}, {"allowedProfiles": ["   "]}, {"allowedProfiles": ["x" * 257]},
    {"allowedProfiles": ["p"] * 257}, {"allowedProfiles": "default"},
    {"artifactRoots": ["relative/dir"]}, {"artifactRoots": ["/a"] * 65}, {"artifactRoots": [""]},
    {"satellite": "yes"}, {"allowInsecureLan": 1},
    {"browser": {"enabled": "no"}}, {"browser": {"maxSessions": 9}}, {"browser": {"idleTimeoutMs": 1}},
    {"browser": {"extra": 1}}, {"browser": False},
    {"computers": {"runtime": "docker", "imageId": "sha256:" + "0" * 64, "network": "host"}},
    {"computers": {"runtime": "lxc", "imageId": "sha256:" + "0" * 64}},
    {"computers": {"runtime": "docker", "imageId": "sha256:" + "0" * 64, "hermesHome": "rel"}},
    {"hermesCredentials": {"username": "u", "password": PASSWORD, "x": 1}},
    {"hermesCredentials": {"username": "u", "password": "p" * 4097}},
])
def test_rule1_schema_generic_message(patch: dict[str, Any]) -> None:
    assert fails(base(**patch)) == C.MSG_INVALID


def test_rule1_not_an_object() -> None:
    assert fails([1, 2]) == C.MSG_INVALID


@pytest.mark.parametrize("url", [
    "https://user:pw@yaoyao.example.com", "https://yaoyao.example.com/?a=1",
    "https://yaoyao.example.com/#x", "https://yaoyao.example.com/base", "ftp://yaoyao.example.com",
])
def test_rule2_server_url(url: str) -> None:
    assert fails(base(serverURL=url)) == C.MSG_SERVER_URL


def test_rule3_http_remote_needs_lan_opt_in() -> None:
    assert fails(base(serverURL="http://192.168.1.5:8080")) == C.MSG_INSECURE
    cfg = C.parse_config(base(serverURL="http://192.168.1.5:8080", allowInsecureLan=True,
                              hermesCredentials={"username": "u", "password": PASSWORD}))
    assert cfg.hermes_credentials is not None and PASSWORD not in repr(cfg)


@pytest.mark.parametrize("url", ["http://127.0.0.1:8080", "http://localhost:8080", "http://[::1]:8"])
def test_rule3_http_loopback_is_fine(url: str) -> None:
    cfg = C.parse_config(base(serverURL=url))
    assert "localhost" not in cfg.server_url


@pytest.mark.parametrize("url", [
    "http://u:p@127.0.0.1:9119", "http://127.0.0.1:9119/?x=1", "http://127.0.0.1:9119/#f",
    "ws://127.0.0.1:9119",
])
def test_rule4_hermes_url(url: str) -> None:
    assert fails(base(hermesURL=url)) == C.MSG_HERMES_URL


def test_rule5_satellite_retired() -> None:
    assert fails(base(satellite=True)) == C.MSG_SATELLITE
    C.parse_config(base(satellite=False))


@pytest.mark.parametrize("url", ["http://localhost:9119", "http://10.0.0.2:9119",
                                 "http://hermes.example.com"])
def test_rule6_local_hermes(url: str) -> None:
    assert fails(base(hermesURL=url)) == C.MSG_LOCAL_HERMES


def test_ipv6_loopback_hermes_ok() -> None:
    assert C.parse_config(base(hermesURL="http://[::1]:9119")).hermes_url == "http://[::1]:9119"


def test_rule_order() -> None:
    # each pair breaks two rules; the earlier one wins
    assert fails(base(serverURL="ftp://x", token="bad")) == C.MSG_INVALID
    assert fails(base(serverURL="http://10.0.0.1/path")) == C.MSG_SERVER_URL
    assert fails(base(serverURL="http://10.0.0.1", hermesURL="ftp://127.0.0.1")) == C.MSG_INSECURE
    assert fails(base(hermesURL="ftp://10.0.0.1", satellite=True)) == C.MSG_HERMES_URL
    assert fails(base(hermesURL="http://10.0.0.1", satellite=True)) == C.MSG_SATELLITE


def test_computers_accepted() -> None:
    cfg = C.parse_config(base(computers={"runtime": "podman", "imageId": "sha256:" + "a" * 64,
                                         "network": "public-proxy", "hermesHome": ""}))
    assert cfg.computers is not None


def write(tmp_path: Any, raw: Any, mode: int = 0o600, text: str | None = None) -> str:
    p = tmp_path / "runner.json"
    p.write_text(text if text is not None else json.dumps(raw))
    os.chmod(p, mode)
    return str(p)


def test_load_mode_check_first(tmp_path: Any) -> None:
    with pytest.raises(C.ConfigError, match="chmod 600"):
        C.load_config(write(tmp_path, base(token="bad"), mode=0o644))
    with pytest.raises(C.ConfigError, match="chmod 600"):
        C.load_config(write(tmp_path, base(), mode=0o640))


def test_load_unreadable(tmp_path: Any) -> None:
    with pytest.raises(C.ConfigError) as info:
        C.load_config(write(tmp_path, None, text='{"token": "' + TOKEN + '", '))
    assert str(info.value) == C.MSG_UNREADABLE and TOKEN not in str(info.value)
    with pytest.raises(C.ConfigError, match="cannot read"):
        C.load_config(str(tmp_path / "missing.json"))


def test_load_ok(tmp_path: Any) -> None:
    assert C.load_config(write(tmp_path, base())).runner_id == base()["runnerId"]
