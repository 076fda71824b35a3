"""Hermes authorization as upstream does it: the loopback session token (refreshed once after a
401) and password accounts (cookie + WebSocket ticket); never a secret in the output."""
from __future__ import annotations

from pathlib import Path

from fixtures import ScriptedHermes

from .integration import rig
from .stub_hermes import StubHermes

PASSWORD = "pw-" + "Zx81" * 5


async def test_token_refreshed_after_401(tmp_path: Path) -> None:
    async with StubHermes() as hermes, rig(tmp_path, hermes.url) as r:
        cmd = {"path": "/api/config", "method": "GET", "search": "profile=default&n=1"}
        assert (await r.cp.command(r.runner_id, "http", cmd, account="alice")).ok
        old = hermes.token
        hermes.rotate()
        cmd["search"] = "profile=default&n=2"
        out = await r.cp.command(r.runner_id, "http", cmd, account="alice")
        assert out.ok and hermes.hits["/api/config?2"] == 1
        assert old.encode() not in r.all_output() and hermes.token.encode() not in r.all_output()
        sent = repr([ex.request_body for ex in r.cp.history])   # nor to the control plane
        assert old not in sent and hermes.token not in sent


async def test_hermes_down_fails_only_that_command(tmp_path: Path) -> None:
    async with rig(tmp_path, "http://127.0.0.1:9") as r:
        out = await r.cp.command(r.runner_id, "http", {"path": "/api/status", "method": "GET"},
                                 account="alice")
        assert out.code == "hermes_unavailable"
        assert r.cp.is_online(r.runner_id)


async def test_account_mode_http_and_gateway(tmp_path: Path) -> None:
    async with ScriptedHermes(None, auth="account", username="ops", password=PASSWORD) as hermes:
        async with rig(tmp_path, hermes.url, start=False) as r:
            r.config["hermesCredentials"] = {"username": "ops", "password": PASSWORD}
            from .runner_proc import write_config
            write_config(r.config_path.parent, r.config)
            await r.runner.start()
            await r.cp.wait_online(r.runner_id, timeout=10)
            out = await r.cp.command(r.runner_id, "http", {"path": "/api/config", "method": "GET"},
                                     account="alice")
            assert out.ok and out.result["status"] == 200
            ch = await r.cp.open_channel(r.runner_id, account="alice", profile="default")
            made = await r.cp.rpc(ch, "session.create", {"profile": "default"})
            assert made.ok
            assert hermes.effects.count("auth.login") >= 1
            assert PASSWORD.encode() not in r.all_output()
            sent = repr([ex.request_body for ex in r.cp.history])   # hermesCredentials never
            assert PASSWORD not in sent                               # reach the control plane
            assert "hermes_session" not in sent.lower() and "set-cookie" not in sent.lower()
