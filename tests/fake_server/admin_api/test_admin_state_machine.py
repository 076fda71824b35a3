"""Admin API: a Hypothesis state machine of two admins over real sockets (the server runs on its
own loop behind a conformance Portal)."""
from __future__ import annotations

import hashlib
import ssl
from typing import Any

import httpx
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, initialize, invariant, rule

from conformance.portal import Portal
from fake_server import ControlPlane
from fake_server.admin import admin_state
from tests.budget import examples

from .admin_client import ADMIN_PW, ALICE_PW, RUNNERS, UUID_ZERO

# -- a state machine over the admin API (real sockets; the server runs on its own loop) -----------


async def _fresh_plane() -> tuple[ControlPlane, ControlPlane]:
    cm = ControlPlane(admin_user="admin", admin_password=ADMIN_PW)
    cp = await cm.__aenter__()
    await cp.store.create_account("admin2", allowed_profiles=["default"], is_admin=True, password=ALICE_PW)
    await cp.store.add_source("node-b", "Node B")
    return cm, cp


#: every client shares one TLS context (httpx builds one per client otherwise, loading the CA
#: bundle each time: ~40 ms; the server is plain http on loopback and never uses it)
_TLS = ssl.create_default_context()


class _SyncAdmin:
    def __init__(self, url: str, user: str, password: str) -> None:
        self.url, self.user, self.password = url, user, password
        self.http = httpx.Client(base_url=url, headers={"Origin": url}, timeout=10, verify=_TLS)
        self.csrf = ""
        self.bodies: list[tuple[int, str]] = []

    def login(self) -> None:
        r = self.http.post("/api/app/login", json={"username": self.user, "password": self.password})
        assert r.status_code == 200, r.text
        self.csrf = r.json()["csrfToken"]

    def send(self, method: str, path: str, body: Any = None, **headers: str) -> tuple[int, Any]:
        hdrs = {"X-CSRF-Token": self.csrf, **headers}
        r = self.http.request(method, path, json=body, headers=hdrs)
        self.bodies.append((r.status_code, r.text))
        return r.status_code, r.json()


def test_admin_api_state_machine() -> None:
    """Registrations, disables, refused mutations and expired sessions by two admins, in any
    order: the list always equals the model, each source owner has at most one enabled runner,
    and no list ever carries a token or its hash. Each example gets a fresh control plane."""
    bg = Portal("admin-machine").start()

    class AdminApi(RuleBasedStateMachine):
        runners = Bundle("runners")

        @initialize()
        def start(self) -> None:
            self.cm, self.cp = bg.run(_fresh_plane(), timeout=30)
            self.admins = {
                "admin": _SyncAdmin(self.cp.url, "admin", ADMIN_PW),
                "admin2": _SyncAdmin(self.cp.url, "admin2", ALICE_PW),
            }
            for a in self.admins.values():
                a.login()
            self.model: dict[str, dict[str, Any]] = {}
            self.owner: dict[str, str] = {}
            self.tokens: list[str] = []
            self.n = 0

        def teardown(self) -> None:
            if hasattr(self, "cm"):
                for a in self.admins.values():
                    a.http.close()
                bg.run(self.cm.__aexit__(None, None, None), timeout=30)

        def _enabled_owner(self, source: str, owner: str) -> bool:
            return any(
                r["enabled"] and r["sourceNodeId"] == source and self.owner[i] == owner
                for i, r in self.model.items()
            )

        @rule(target=runners, who=st.sampled_from(["admin", "admin2"]), source=st.sampled_from(["local", "node-b"]))
        def register(self, who: str, source: str) -> str:
            self.n += 1
            owner = "_system" if source == "local" else who
            busy = self._enabled_owner(source, owner)
            status, body = self.admins[who].send(
                "POST", RUNNERS, {"name": f"r{self.n}", "sourceNodeId": source, "allowedProfiles": ["default"]}
            )
            if busy:
                assert (status, body["code"]) == (409, "runner_source_in_use")
                return ""
            assert status == 201, body
            self.model[body["runner"]["id"]] = body["runner"]
            self.owner[body["runner"]["id"]] = owner
            self.tokens.append(body["token"])
            return str(body["runner"]["id"])

        @rule(runner=runners, who=st.sampled_from(["admin", "admin2"]))
        def disable(self, runner: str, who: str) -> None:
            status, body = self.admins[who].send("DELETE", f"{RUNNERS}/{runner or UUID_ZERO}")
            if not runner:
                assert (status, body["code"]) == (404, "workspace_not_found")
                return
            assert (status, body) == (200, {"ok": True})
            self.model[runner]["enabled"] = False

        @rule(runner=runners, how=st.sampled_from(["no-csrf", "wrong-csrf", "evil-origin", "no-origin"]))
        def refused_disable(self, runner: str, how: str) -> None:
            a = self.admins["admin"]
            headers = {
                "no-csrf": {"X-CSRF-Token": ""},
                "wrong-csrf": {"X-CSRF-Token": a.csrf[::-1]},
                "evil-origin": {"Origin": "http://evil.example"},
                "no-origin": {"Origin": ""},
            }[how]
            status, body = a.send("DELETE", f"{RUNNERS}/{runner or UUID_ZERO}", **headers)
            want = "invalid_csrf" if how.endswith("csrf") else "invalid_origin"
            assert (status, body["code"]) == (403, want)

        @rule(who=st.sampled_from(["admin", "admin2"]))
        def sessions_expire(self, who: str) -> None:
            assert self.cp.app is not None
            bg.run(_call(admin_state(self.cp.app).expire_sessions), timeout=30)
            status, body = self.admins[who].send("GET", RUNNERS)
            assert (status, body["code"]) == (401, "authentication_required")
            for a in self.admins.values():
                a.login()

        @invariant()
        def list_equals_model(self) -> None:
            status, body = self.admins["admin"].send("GET", RUNNERS)
            assert status == 200
            got = {r["id"]: (r["name"], r["sourceNodeId"], r["enabled"]) for r in body["runners"]}
            want = {i: (r["name"], r["sourceNodeId"], r["enabled"]) for i, r in self.model.items()}
            assert got == want

        @invariant()
        def one_enabled_runner_per_source_owner(self) -> None:
            pairs = [(r["sourceNodeId"], self.owner[i]) for i, r in self.model.items() if r["enabled"]]
            assert len(pairs) == len(set(pairs))

        @invariant()
        def no_token_outside_its_201(self) -> None:
            secrets = self.tokens + [hashlib.sha256(t.encode()).hexdigest() for t in self.tokens]
            for a in self.admins.values():
                for status, text in a.bodies:
                    if status == 201:
                        continue  # a registration answer: the one place its token may be
                    assert not any(s in text for s in secrets)
                a.bodies.clear()

    try:
        AdminApi.TestCase.settings = settings(max_examples=examples(ci=4), stateful_step_count=10)
        AdminApi.TestCase().runTest()
    finally:
        bg.close()


async def _call(fn: Any) -> Any:
    return fn()
