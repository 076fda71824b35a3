"""The gate sequence of §2.3: one test per gate, exact status and code, and order tests."""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Callable

from fake_server import ControlPlane
from fake_server.codes import CODES
from fake_server.control import Registration
from fake_server.gates import GATES, Action, Ask, RunnerView, decide

from .fake_server_client import Client


def code(payload: object) -> object:
    return payload.get("code") if isinstance(payload, dict) else payload


async def test_healthy_poll_has_no_store_and_epoch(cp: ControlPlane, client: Client) -> None:
    status, body, resp = await client.request("poll", reset=True)
    assert status == 200 and set(body) == {"epoch", "commands"} and body["commands"] == []
    hub_id, state_id = body["epoch"].split(":")
    uuid.UUID(hub_id), uuid.UUID(state_id)
    assert resp.headers["Cache-Control"] == "no-store"


async def test_gate1_origin(client: Client) -> None:
    status, body, resp = await client.request("poll", headers={"Origin": "http://127.0.0.1"})
    assert (status, code(body)) == (403, "runner_unauthorized")
    assert set(body) == {"error", "code"} and resp.headers["Cache-Control"] == "no-store"


async def test_gate1_bad_tokens(cp: ControlPlane, client: Client, make_client: Callable[..., Client]) -> None:
    for auth in [None, "", "Basic abc", "Bearer", "Bearer ", "bearer " + client.token,
                 "Bearer " + client.token + "x", "Bearer " + client.token[:-1]]:
        status, body, _ = await client.request("poll", headers={"Authorization": auth})
        assert (status, code(body)) == (403, "runner_unauthorized"), auth
    other = make_client(runner_id=str(uuid.uuid4()))
    assert code((await other.poll())[1]) == "runner_unauthorized"
    bad_id = make_client(runner_id="not-a-runner")
    assert (await bad_id.poll())[0] == 403
    # the token never appears in any answer
    assert all(client.token not in str(ex.response_body) for ex in cp.history)


async def test_gate1_disabled_runner(cp: ControlPlane, client: Client, reg: Registration) -> None:
    await client.connect()
    await cp.disable_runner(reg.runner_id)
    status, body = await client.poll(reset=True)
    assert (status, code(body)) == (403, "runner_unauthorized")


def test_gates_are_rows_and_decide_copies_the_view() -> None:
    assert [g.number for g in GATES] == [0, 1, None, 2, 3, 4, 5, 6, 7, 8, 9]
    assert [g.name for g in GATES if g.keeps_actions_on_refusal] == ["9 method"]
    for g in GATES:
        if g.status:  # a refusing gate names a row of the code table
            assert (CODES[g.code].status, CODES[g.code].message) == (g.status, g.message)
    token = "t" * 43
    old, new = str(uuid.uuid4()), str(uuid.uuid4())
    view = RunnerView(exists=True, enabled=True, token_hash=hashlib.sha256(token.encode()).hexdigest(),
                      online_instance=old, online_epoch="h:s")
    ask = Ask.from_headers("poll", "GET", {"Authorization": f"Bearer {token}", "x-runner-instance": new,
                                           "x-runner-protocol": "1"})
    d = decide(ask, view)
    assert d.refusal is None and d.actions == [Action.REPLACE, Action.ENSURE_ONLINE]
    assert view.online_instance == old and view.retired == frozenset()  # the input is untouched
    assert d.view.retired == {old} and d.view.online_instance is None


async def test_gate2_protocol_mismatch(client: Client) -> None:
    for over in [{"x-runner-instance": None}, {"x-runner-instance": "nope"},
                 {"x-runner-protocol": "2"}, {"x-runner-protocol": None},
                 {"x-runner-instance": str(uuid.uuid4()) + "0"}]:
        status, body, _ = await client.request("poll", headers=over)  # type: ignore[arg-type]
        assert (status, code(body)) == (409, "runner_protocol_mismatch"), over


async def test_order_gate1_before_gate2(client: Client) -> None:
    status, body, _ = await client.request(
        "poll", headers={"Origin": "http://x", "x-runner-protocol": "2"})
    assert (status, code(body)) == (403, "runner_unauthorized")


async def test_gate3_reset_poll_makes_new_epoch(cp: ControlPlane, client: Client, reg: Registration) -> None:
    first = await client.connect()
    status, body = await client.poll(reset=True)
    assert status == 200 and body["epoch"] != first
    assert body["epoch"].split(":")[0] == first.split(":")[0]  # same hub
    assert cp.hub.slots[reg.runner_id].disconnects == ["reset"]


async def test_gate4_non_poll_offline_or_other_instance(client: Client, make_client: Callable[..., Client]) -> None:
    status, body = await client.post("admit", {"id": "x"})
    assert (status, code(body)) == (409, "runner_instance_changed")  # offline
    await client.connect()
    other = make_client()
    other.epoch = client.epoch
    status, body = await other.post("admit", {"id": "x"})
    assert (status, code(body)) == (409, "runner_instance_changed")


async def test_order_gate2_before_gate4(client: Client) -> None:
    status, body, _ = await client.request("admit", body={"id": "x"}, headers={"x-runner-protocol": "0"})
    assert (status, code(body)) == (409, "runner_protocol_mismatch")


async def test_gate5_retired_and_gate6_replacement(
    cp: ControlPlane, client: Client, make_client: Callable[..., Client], reg: Registration
) -> None:
    old_epoch = await client.connect()
    new = make_client()
    new_epoch = await new.connect()
    assert new_epoch != old_epoch
    assert cp.hub.slots[reg.runner_id].disconnects == ["replaced"]
    status, body = await client.poll(reset=True)
    assert (status, code(body)) == (409, "runner_instance_retired")
    # a non-poll from the retired instance is refused earlier, by gate 4
    status, body = await client.post("admit", {"id": "x"})
    assert (status, code(body)) == (409, "runner_instance_changed")
    assert cp.epoch(reg.runner_id) == new_epoch  # the fenced poll did not disturb the new one


async def test_gate6_instance_limit(cp: ControlPlane, make_client: Callable[..., Client], reg: Registration) -> None:
    clients = [make_client() for _ in range(258)]
    for c in clients[:257]:
        assert (await c.poll(reset=True))[0] == 200
    assert len(cp.hub.slots[reg.runner_id].retired) == 256
    status, body = await clients[257].poll(reset=True)
    assert (status, code(body)) == (409, "runner_instance_limit")
    assert cp.epoch(reg.runner_id) == clients[256].epoch  # the current instance stays online
    # the limit is cleared by a restart
    await cp.restart()
    assert (await clients[257].poll(reset=True))[0] == 200


async def test_gate7_epoch_changed(client: Client) -> None:
    epoch = await client.connect()
    for bad in [None, "", epoch + "x", "a:b"]:
        status, body, _ = await client.request("admit", body={"id": "x"}, headers={"x-runner-epoch": bad})
        assert (status, code(body)) == (409, "runner_epoch_changed"), bad
    status, body = await client.post("admit", {"id": "x"})
    assert (status, body) == (200, {"allowed": False})


async def test_order_gate4_before_gate7(client: Client, make_client: Callable[..., Client]) -> None:
    await client.connect()
    other = make_client()
    other.epoch = "stale:epoch"
    status, body = await other.post("admit", {"id": "x"})
    assert (status, code(body)) == (409, "runner_instance_changed")


async def test_gate8_features_stored(cp: ControlPlane, client: Client, reg: Registration) -> None:
    client.features = "credential-ref-v1, bogus-v9,execution-context-v1"
    await client.connect()
    rec = await cp.store.get_runner(reg.runner_id)
    assert rec is not None and rec.features == ("credential-ref-v1", "execution-context-v1")
    client.features = ""  # empty header keeps the stored list
    await client.post("admit", {"id": "x"})
    rec = await cp.store.get_runner(reg.runner_id)
    assert rec is not None and rec.features == ("credential-ref-v1", "execution-context-v1")
    client.features = "managed-browser-v1"
    await client.post("admit", {"id": "x"})
    rec = await cp.store.get_runner(reg.runner_id)
    assert rec is not None and rec.features == ("managed-browser-v1",)


async def test_gate9_method(client: Client) -> None:
    await client.connect()
    status, body, _ = await client.request("admit", method="GET")
    assert (status, code(body)) == (405, "method_not_allowed")
    status, body, _ = await client.request("poll", method="POST", body={})
    assert (status, code(body)) == (405, "method_not_allowed")
    status, body, _ = await client.request("result", method="PUT", body={})
    assert (status, code(body)) == (405, "method_not_allowed")


async def test_order_gate7_before_gate9(client: Client) -> None:
    await client.connect()
    status, body, _ = await client.request("admit", method="GET", headers={"x-runner-epoch": "x:y"})
    assert (status, code(body)) == (409, "runner_epoch_changed")


async def test_gate9_method_on_first_poll_still_goes_online(cp: ControlPlane, client: Client, reg: Registration) -> None:
    status, body, _ = await client.request("poll", method="POST", body={})
    assert (status, code(body)) == (405, "method_not_allowed")
    assert cp.is_online(reg.runner_id)  # gate 8 ran before gate 9


async def test_gate10_body(cp: ControlPlane, client: Client) -> None:
    await client.connect()
    for raw in [b"", b"{", b"[]", b"1", b'"x"', b"null", b"\xff\xfe", b'{"a":1}x']:
        status, body, _ = await client.request("admit", raw=raw)
        assert (status, code(body)) == (400, "invalid_json"), raw
    limit = cp.limits.request_body
    big = b'{"id":"' + b"a" * (limit - 8) + b'"}'
    assert len(big) == limit + 1
    status, body, _ = await client.request("result", raw=big)
    assert (status, code(body)) == (413, "runner_payload_limit")
    ok = b'{"id":"' + b"a" * (limit - 9) + b'"}'
    status, body, _ = await client.request("result", raw=ok)
    assert (status, body) == (200, {"ok": True})


async def test_order_gate9_before_gate10(client: Client) -> None:
    await client.connect()
    status, body, _ = await client.request("admit", method="PUT", raw=b"{")
    assert (status, code(body)) == (405, "method_not_allowed")


async def test_unknown_route_after_auth(client: Client) -> None:
    status, body, _ = await client.request("heartbeat", headers={"Origin": "x"})
    assert (status, code(body)) == (403, "runner_unauthorized")
    await client.connect()
    status, body, _ = await client.request("heartbeat")
    assert (status, code(body)) == (404, "not_found")
    status, body, _ = await client.request("poll/extra")
    assert (status, code(body)) == (404, "not_found")


ALL_FEATURES = (
    "execution-context-v1", "vm-egress-v1", "workspace-memory-bind-v1", "hermes-computer-v2",
    "profile-computer-v1", "host-computer-tools-v1", "file-transfer-v1", "idle-stop-policy-v1",
    "computer-worker-v1", "artifact-chunks-v1", "helper-retirement-v1", "computer-control-v1",
    "shared-computer-v1", "local-vm-v1", "image-options-v1", "image-ready-v1",
    "compose-desktops-v1", "managed-browser-v1", "managed-browser-setup-v1",
    "managed-browser-disabled-v1", "managed-browser-retention-v1", "credential-ref-v1",
)  # §2.2, copied here on purpose: the test must not read the list from the code it checks


async def test_gate8_feature_header_semantics(cp: ControlPlane, client: Client, reg: Registration) -> None:
    async def stored() -> tuple[str, ...]:
        rec = await cp.store.get_runner(reg.runner_id)
        assert rec is not None
        return rec.features

    # every accepted name is kept, in header order; unknown and misspelt ones are dropped,
    # repeats are kept (upstream: split(",") then filter, no trim, no de-duplication)
    client.features = ",".join(ALL_FEATURES[::-1]) + ",Credential-ref-v1,credential-ref-v2,,credential-ref-v1"
    await client.connect()
    assert await stored() == ALL_FEATURES[::-1] + ("credential-ref-v1",)
    # an absent header and an empty (or blank: the HTTP parser trims it) one leave the list
    for header in (None, "", " "):
        client.features = header
        await client.post("admit", {"id": "x"})
        assert await stored() == ALL_FEATURES[::-1] + ("credential-ref-v1",), header
    # a header of commas is not empty: its accepted list, [], is stored
    client.features = ",,"
    await client.post("admit", {"id": "x"})
    assert await stored() == ()
    # names are not trimmed: "a, b" keeps only a
    client.features = "local-vm-v1, credential-ref-v1,execution-context-v1"
    await client.post("admit", {"id": "x"})
    assert await stored() == ("local-vm-v1", "execution-context-v1")
    # only unknown names: the header is not empty, so the (empty) accepted list is stored
    client.features = "bogus-v1"
    await client.post("admit", {"id": "x"})
    assert await stored() == ()


async def test_gate2_instance_must_be_lower_case(client: Client) -> None:
    inst = str(uuid.uuid4())
    for bad in (inst.upper(), inst[:-1] + "A", "{" + inst[1:-1] + "}", inst.replace("-", "g")):
        status, body, _ = await client.request("poll", reset=True, headers={"x-runner-instance": bad})
        assert (status, code(body)) == (409, "runner_protocol_mismatch"), bad
    # upstream's pattern is 36 characters of [0-9a-f-], not the 8-4-4-4-12 layout
    status, _, _ = await client.request("poll", reset=True, headers={"x-runner-instance": "-" * 4 + "a" * 32})
    assert status == 200


async def test_gate1_empty_origin_counts_as_absent(client: Client) -> None:
    status, body, _ = await client.request("poll", reset=True, headers={"Origin": ""})
    assert status == 200, body
    status, body, _ = await client.request("poll", reset=True, headers={"Origin": "null"})
    assert (status, code(body)) == (403, "runner_unauthorized")


async def test_gate0_host_allow_list(cp: ControlPlane, client: Client) -> None:
    port = cp.port
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"LOCALHOST:{port}", f"[::1]:{port}"):
        status, body, _ = await client.request("poll", reset=True, headers={"Host": host})
        assert status == 200, (host, body)
    for host in ("evil.example", f"evil.example:{port}", "127.0.0.1", f"127.0.0.1:{port + 1}"):
        # before everything else, even before authorization and the route check
        for route in ("poll", "heartbeat"):
            status, body, resp = await client.request(
                route, headers={"Host": host, "Origin": "http://evil.example", "Authorization": None})
            assert (status, code(body)) == (421, "invalid_host"), host
            assert resp.headers["Cache-Control"] == "no-store"


async def test_gate0_host_allow_list_is_configurable(client: Client) -> None:
    async with ControlPlane(allowed_hosts=("cp.test:8443",)) as plane:
        reg = await plane.register_runner()
        c = Client(client.session, plane.url, reg.runner_id, reg.token)
        assert (await c.poll(reset=True))[1]["code"] == "invalid_host"
        status, _, _ = await c.request("poll", reset=True, headers={"Host": "CP.test:8443"})
        assert status == 200
    async with ControlPlane(allowed_hosts=("*",)) as plane:
        reg = await plane.register_runner()
        c = Client(client.session, plane.url, reg.runner_id, reg.token)
        status, _, _ = await c.request("poll", reset=True, headers={"Host": "anything"})
        assert status == 200
