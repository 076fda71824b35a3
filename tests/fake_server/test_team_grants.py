"""The team world's async edge: grants' handlers (as the hub's ``tool`` relay runs them), two
administrators at once, revocation mid-flight, and report delivery (no sockets)."""
from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from fake_server import ToolError
from fake_server.relay import run_tool
from fake_server.team import Origin, TeamDesk, tool_id


def two_grants() -> tuple[TeamDesk, Any, Any]:
    desk = TeamDesk()
    ana = desk.grant("ana", "ana", Origin("ana", "sa", "sta"))
    ben = desk.grant("ben", "ben", Origin("ben", "sb", "stb"))
    return desk, ana, ben


async def relay(grant: Any, op: str, args: dict[str, Any], tag: str | None = None
                ) -> tuple[int, dict[str, Any]]:
    """What the hub's ``tool`` route does with a relayed call (``fake_server.hub.run_tool``)."""
    lease = SimpleNamespace(handlers=grant.handlers)
    return await run_tool(lease, tool_id(tag or grant.tag, op), args)  # type: ignore[arg-type]


def test_two_grants_have_distinct_names_and_ids() -> None:
    _, ana, ben = two_grants()
    a = {(t["id"], t["name"]) for t in ana.tools}
    b = {(t["id"], t["name"]) for t in ben.tools}
    assert len(a) == len(b) == 7
    assert not {i for i, _ in a} & {i for i, _ in b}
    assert not {n for _, n in a} & {n for _, n in b}
    for t in ana.tools:
        assert t["inputSchema"]["type"] == "object" and t["description"]


async def test_a_call_through_the_relay_executes_and_answers_200() -> None:
    desk, ana, _ = two_grants()
    status, body = await relay(ana, "create_member",
                               {"requestId": "m1", "name": "Ada", "profile": "default"})
    assert status == 200 and body["result"]["member"]["name"] == "Ada"
    assert (ana.stats.calls, ana.stats.executed) == (1, 1)
    status, body = await relay(ana, "create_member", {"requestId": "m1", "name": "Ada"})
    assert (status, body["code"]) == (400, "team_invalid_arguments")
    assert desk.world.executions == 1


async def test_a_grant_answers_only_its_own_ids() -> None:
    desk, ana, ben = two_grants()
    # ben's lease carries only ben's handlers: ana's id is unknown there (no cross-talk).
    status, body = await relay(ben, "create_member",
                               {"requestId": "m1", "name": "Ada", "profile": "default"}, "ana")
    assert (status, body["code"]) == (404, "team_tool_not_found")
    with pytest.raises(ToolError) as e:
        await ben.handle(tool_id("ana", "create_member"),
                         {"requestId": "m1", "name": "Ada", "profile": "default"})
    assert e.value.code == "team_tool_unknown" and desk.world.executions == 0


async def test_two_administrators_at_once_lose_no_update() -> None:
    desk, ana, ben = two_grants()
    n = 40

    async def make(grant: Any, i: int) -> tuple[int, dict[str, Any]]:
        await asyncio.sleep(0)
        return await relay(grant, "create_member", {"requestId": f"m{i}",
                                                    "name": f"{grant.tag}{i}",
                                                    "profile": "default"})

    answers = await asyncio.gather(*(make(g, i) for i in range(n) for g in (ana, ben)))
    assert all(s == 200 for s, _ in answers)
    assert len(desk.world.members) == 2 * n and desk.world.revision == 2 * n
    assert {m.created_by for m in desk.world.members.values()} == {"ana", "ben"}
    assert ana.stats.executed == ben.stats.executed == n


async def test_revoked_mid_flight_nothing_executes_after() -> None:
    desk, ana, _ = two_grants()
    hold = ana.hold("create_member")
    call = asyncio.ensure_future(relay(ana, "create_member",
                                       {"requestId": "m1", "name": "Ada", "profile": "default"}))
    await asyncio.wait_for(hold.reached.wait(), 5)
    desk.revoke(None, ana)
    status, body = await call
    assert (status, body["code"]) == (403, "team_grant_revoked")
    status, body = await relay(ana, "form_team", {"requestId": "t", "name": "x",
                                                  "members": ["Ada"]})
    assert (status, body["code"]) == (403, "team_grant_revoked")
    assert desk.world.executions == 0 and desk.world.members == {}
    assert (ana.stats.calls, ana.stats.refused, ana.stats.executed) == (2, 2, 0)


async def test_a_call_waiting_for_the_lock_when_revoked_is_refused() -> None:
    desk, ana, _ = two_grants()
    async with desk.lock:
        call = asyncio.ensure_future(relay(ana, "create_member", {
            "requestId": "m1", "name": "Ada", "profile": "default"}))
        await asyncio.sleep(0)
        desk.revoke(None, ana)
    assert (await call)[0] == 403 and desk.world.executions == 0


class FakeCP:
    def __init__(self) -> None:
        self.sent: list[tuple[Any, str, dict[str, Any]]] = []

    async def rpc(self, ch: Any, method: str, params: dict[str, Any]) -> Any:
        self.sent.append((ch, method, params))
        return SimpleNamespace(ok=True, result={"status": "streaming"})


async def test_the_report_goes_into_the_originating_session() -> None:
    desk, ana, ben = two_grants()
    ana.channel, ben.channel = "channel-a", "channel-b"
    steps: list[tuple[str, dict[str, Any]]] = [
        ("create_member", {"name": "Ada", "profile": "default"}),
        ("form_team", {"name": "core", "members": ["Ada"]}),
        ("create_task", {"team": "core", "title": "ship", "goal": "Ship v1"}),
        ("assign_task", {"task": "ship", "member": "Ada"})]
    for op, args in steps:
        assert (await relay(ana, op, {**args, "requestId": op}))[0] == 200
    for op, args in [("review_task", {"task": "ship", "verdict": "approve"}),
                     ("complete_goal", {"task": "ship", "summary": "shipped"})]:
        assert (await relay(ben, op, {**args, "requestId": op}))[0] == 200
    # a repeated complete_goal (same request id) sends no second report
    assert (await relay(ben, "complete_goal", {"task": "ship", "summary": "shipped",
                                               "requestId": "complete_goal"}))[0] == 200
    cp = FakeCP()
    sent = await desk.deliver_reports(cp)  # type: ignore[arg-type]
    assert len(sent) == 1 and len(cp.sent) == 1
    ch, method, params = cp.sent[0]
    assert (ch, method, params["session_id"]) == ("channel-a", "prompt.submit", "sa")
    assert params["text"].startswith("REPORT task ship")
    assert await desk.deliver_reports(cp) == []  # type: ignore[arg-type]
