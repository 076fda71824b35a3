"""Probes of the permission and secrets controls: ``negative_controls/controls_permission.py`` (see
``nc_probes.py``)."""
from __future__ import annotations

import os
import tempfile
import uuid
from collections.abc import Callable
from types import SimpleNamespace as NS
from typing import Any

from tests.negative_controls.nc_probes import _accepts, _config, _raises, probe


def _page_client(seen: list[str]) -> Any:
    async def _raw(method: str, path: str, **_: Any) -> Any:
        seen.append(f"{method} {path}")
        if path == "/":
            return 200, {}, b'<script>window.__HERMES_SESSION_TOKEN__="' + b"t" * 40 + b'";</script>'
        return 200, {}, b"[]"
    return NS(_raw=_raw, _token=None, _account_mode=True)


@probe("session-token-cached-on-disk")
async def _token_cached() -> bool:
    import os
    import tempfile

    from runner_ref.hermes import HermesClient
    here = os.getcwd()
    with tempfile.TemporaryDirectory() as tmp:
        os.chdir(tmp)
        try:
            await HermesClient._read_page_token(_page_client([]))  # type: ignore[arg-type]
            return bool(os.listdir(tmp))
        finally:
            os.chdir(here)


@probe("unvalidated-session-token")
async def _unvalidated() -> bool:
    from runner_ref.hermes import HermesClient
    seen: list[str] = []
    await HermesClient._read_page_token(_page_client(seen))  # type: ignore[arg-type]
    return "GET /api/profiles" not in seen


@probe("hermes-url-userinfo-accepted")
def _userinfo() -> bool:
    return _accepts(hermesURL="http://u:p@127.0.0.1:9119")


@probe("token-in-child-env")
async def _child_env() -> bool:
    from runner_ref.poll_loop import PollLoop

    async def retire(*_a: Any) -> None:
        return None
    me = NS(cfg=NS(token="t" * 40), store=NS(retire=retire), _helper=None)
    await PollLoop._retire_now(me)  # type: ignore[arg-type]
    helper = me._helper
    if helper is None:
        return False
    helper.kill()
    helper.wait()
    return True


@probe("computer-status-relayed")
def _computer_status() -> bool:
    from runner_ref import http_kind
    from runner_ref.errors import CommandError
    try:
        http_kind.plan_http({"path": "/api/status", "method": "GET", "computer": {"id": "vm"}},
                            ("default",), ())
    except CommandError:
        return False
    return True


@probe("active-list-missing-is-empty")
async def _active_list_missing() -> bool:
    from runner_ref.gateway import Gateways

    async def call(_method: str, _params: Any) -> Any:
        return {}
    ch = NS(sessions={"s1": "default"}, call=call)
    try:
        params = {"profile": "default", "current_session_id": "s1"}
        out = await Gateways._active_list(NS(), ch, params)  # type: ignore[arg-type]
    except Exception:
        return False
    return out == {"sessions": []}


def _tree() -> tuple[tempfile.TemporaryDirectory[str], str, str]:
    tmp = tempfile.TemporaryDirectory(prefix="negctl-roots-")
    root = os.path.join(tmp.name, "root")
    os.makedirs(root)
    os.makedirs(os.path.join(tmp.name, "outside"))
    secret = os.path.join(tmp.name, "outside", "secret.txt")
    with open(secret, "w") as f:
        f.write("s")
    os.symlink(secret, os.path.join(root, "link.txt"))
    return tmp, root, secret


def _exports(path_in: Callable[[str, str], str], roots: Callable[[str], tuple[str, ...]]) -> bool:
    from runner_ref import http_plan
    tmp, root, secret = _tree()
    with tmp:
        return not _raises(lambda: http_plan.contained_path(path_in(root, secret), roots(root)))


probe("follow-symlinks")(lambda: _exports(lambda r, s: r + "/link.txt", lambda r: (r,)))


probe("no-dotdot-normalisation")(
    lambda: _exports(lambda r, s: r + "/../outside/secret.txt", lambda r: (r,)))


probe("empty-roots-allow-all")(lambda: _exports(lambda r, s: s, lambda r: ()))


async def _relay(payload: dict[str, Any]) -> tuple[list[str], Any]:
    from runner_ref import poll_loop
    methods: list[str] = []

    async def request(method: str, path: str, params: Any = None) -> Any:
        methods.append(method)
        return 200, {"content-type": "application/json", "set-cookie": "hermes=1"}, b"{}"
    try:
        hermes: Any = NS(request=request)
        out = await poll_loop.run_http(payload, hermes, ("default",), ())
    except Exception:  # noqa: BLE001 - refused
        out = None
    return methods, out


@probe("http-any-method")
async def _any_method() -> bool:
    return "POST" in (await _relay({"method": "POST", "path": "/api/status"}))[0]


@probe("relays-all-headers")
async def _all_headers() -> bool:
    out = (await _relay({"method": "GET", "path": "/api/status"}))[1]
    return "set-cookie" in out["headers"]


def _plans(payload: dict[str, Any]) -> bool:
    from runner_ref import http_plan
    return not _raises(lambda: http_plan.plan_http(payload, ("default",), ()))


probe("http-any-path")(lambda: _plans({"method": "GET", "path": "/api/env"}))


probe("http-no-profile-check")(
    lambda: _plans({"method": "GET", "path": "/api/config", "search": "profile=evil"}))


@probe("session-no-profile-check")
def _session_profile() -> bool:
    from runner_ref import gateway
    return not _raises(lambda: gateway.require_profile("evil", ("default",)))


@probe("rpc-any-method")
def _rpc_method() -> bool:
    from runner_ref import gateway
    return not _raises(lambda: gateway.check_rpc_method("shell.exec", False))


@probe("cleanup-any-method")
def _cleanup() -> bool:
    from runner_ref import gateway
    return not _raises(lambda: gateway.check_rpc_method("prompt.submit", True))


@probe("active-list-unfiltered")
async def _active_list() -> bool:
    from runner_ref.gateway import Gateways

    async def call(method: str, params: Any, on_result: Any = None) -> Any:
        return {"sessions": [{"id": "s1", "status": "idle"}, {"id": "s2", "status": "running"}]}
    ch = NS(sessions={"s1": object()}, call=call)
    out = await Gateways._active_list(NS(), ch, {"profile": "default",  # type: ignore[arg-type]
                                                 "current_session_id": "s1"})
    return len(out["sessions"]) == 2


@probe("config-error-echoes-input")
def _config_echo() -> bool:
    from runner_ref import config
    try:
        config.parse_config({**_config(), "protocol": 2, "token": "S" * 40})
    except config.ConfigError as exc:
        return "S" * 40 in str(exc)
    return False


@probe("auth-error-quotes-login")
async def _login() -> bool:
    from runner_ref.config import HermesCredentials
    from runner_ref.errors import CommandError
    from runner_ref.hermes import HermesClient
    hc = HermesClient("http://127.0.0.1:9", HermesCredentials("u", "pw-secret-123"))

    async def _raw(*args: Any, **kwargs: Any) -> Any:
        return 401, {}, b""
    hc._raw = _raw  # type: ignore[method-assign]
    try:
        await hc._login()
    except CommandError as exc:
        return "pw-secret-123" in exc.message
    return False


@probe("lease-result-reveals-token")
async def _lease_token() -> bool:
    from runner_ref.teamtools.leases import LeaseManager

    async def relay(*args: Any) -> Any:
        return None
    lm = LeaseManager(relay=relay, plugin=NS(), auto_renew=False,  # type: ignore[arg-type]
                      sessions=NS(owner_of=lambda rid: ("c1", "default"),
                                  stored_id=lambda rid: None))
    lease_id = str(uuid.uuid4())
    out = await lm.create({"leaseId": lease_id, "profile": "default", "workId": "w1",
                           "session": {"runtimeId": "s1"}, "catalog": []})
    lease: Any = lm.lease(lease_id)
    token = lease.listener.token
    await lm.dispose_all()
    return token in str(out)
