"""Spec-coverage cases that switch on an opt-in scripted-Hermes behaviour (``long_rpc_errors``
…; see docs/scripted-hermes.md). The runner is a black box; every wait is bounded.
"""

from __future__ import annotations

from typing import Any

from conformance.marks import case
from conformance.verdict import expect
from fixtures.hermes.script import Script

from ._helpers_channels import expect_error, new_session, outcome_text

CAP = 1000   # §2.6.3: an error result's message, at most


def _error_posts(world: Any, after_seq: int) -> list[Any]:
    return [ex for ex in world.cp.history
            if ex.route == "result" and ex.seq > after_seq and isinstance(ex.request_body, dict)
            and isinstance(ex.request_body.get("error"), dict)]


@case("WIR-906", hermes_script=Script.bundled("slow", long_rpc_errors=True))
async def test_long_hermes_error_is_capped(world: Any) -> None:
    """Hermes answers session.steer without text with a JSON-RPC error whose message has 5000
    chars; the runner's error result (its posted ``error.message``) holds at most 1000.

    fails when: the runner forwards Hermes' error text uncapped (or caps only what it logs)."""
    cp = world.cp
    ch = await cp.open_channel(world.runner_id)
    sid = await new_session(world, ch)
    mark = max((ex.seq for ex in cp.history), default=0)
    out = await cp.rpc(ch, "session.steer", {"session_id": sid})
    expect_error(world, out, what="session.steer that Hermes answers with a 5000-char error",
                 needles=[sid])
    posts = _error_posts(world, mark)
    sizes = [len(str(ex.request_body["error"].get("message", ""))) for ex in posts]
    expect(bool(sizes) and max(sizes) <= CAP,
           expected=f"error results with a message of at most {CAP} chars",
           actual=f"messages of {sizes} chars" if sizes else "no error result posted")


@case("PERM-903", hermes_script=Script.bundled("slow", active_list_without_list=True))
async def test_active_list_without_a_list_is_unconfirmed(world: Any) -> None:
    """Hermes answers session.active_list with ``{}``: the runner must answer 502
    session_stop_unconfirmed — the control plane cannot tell whether the session still runs.

    fails when: the runner reads a missing list as an empty one ("nothing is running"), so a
    stop is confirmed that Hermes never confirmed."""
    cp = world.cp
    ch = await cp.open_channel(world.runner_id)
    sid = await new_session(world, ch)
    out = await cp.rpc(ch, "session.active_list", {"profile": "default",
                                                   "current_session_id": sid})
    expect(not out.ok and out.status == 502 and out.code == "session_stop_unconfirmed",
           expected="502 session_stop_unconfirmed for an active_list reply without a list",
           actual=outcome_text(out))
