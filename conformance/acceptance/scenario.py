"""The acceptance scenario as a script of model decisions (issue 12), shared by both variants.

Rules:
- A ``Turn`` is one prompt into one administrator's session and the model's decisions for it:
  the team-tool calls it makes, in order, then the text it says. The decisions are fixed: this
  measures the protocol and the plumbing, never a model.
- ``scripted_hermes_script()`` turns the scenario into a ``fixtures.hermes`` script (``team_tool``
  steps); ``model_server_script()`` into a ``fixtures.real_hermes`` ``Script`` (``Call`` steps)
  for a real Hermes. Both come from the same ``TURNS``.
- Tool names are the grant's (``<admin>_<op>``): the catalogue of each grant prefixes its tag,
  so the two administrators' tools never share a name. Each prompt starts with its own rule
  prefix; the report the control plane sends back starts with ``REPORT``.
- ``EXPECTED`` is what the scenario must leave behind, counted at every hop.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

ADMINS = ("ana", "ben")
PROFILE = "default"


@dataclass(frozen=True)
class Decision:
    op: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class Turn:
    admin: str
    prompt: str          # starts with the rule prefix (the first word)
    calls: tuple[Decision, ...]
    say: str

    @property
    def prefix(self) -> str:
        return self.prompt.split()[0]


def _member(rid: str, name: str) -> Decision:
    return Decision("create_member", {"requestId": rid, "name": name, "profile": PROFILE})


ANA_1 = Turn("ana", "ANA1 build the core team and dispatch the ship task", (
    _member("ana-m1", "Ada"),
    _member("ana-m1", "Ada"),  # the same request id again: same answer, nothing created twice
    _member("ana-m2", "Bo"),
    Decision("form_team", {"requestId": "ana-t1", "name": "core", "members": ["Ada", "Bo"]}),
    Decision("create_task", {"requestId": "ana-k1", "team": "core", "title": "ship",
                             "goal": "Ship v1"}),
    Decision("assign_task", {"requestId": "ana-a1", "task": "ship", "member": "Ada"}),
), "Ana dispatched ship to Ada.")

BEN_1 = Turn("ben", "BEN1 build the ops team and dispatch the audit task", (
    _member("ben-m1", "Cy"),
    Decision("form_team", {"requestId": "ben-t1", "name": "ops", "members": ["Cy"]}),
    Decision("create_task", {"requestId": "ben-k1", "team": "ops", "title": "audit",
                             "goal": "Audit the logs"}),
    Decision("assign_task", {"requestId": "ben-a1", "task": "audit", "member": "Cy"}),
    _member("ben-m1", "Cyd"),  # the same request id with other input: idempotency_conflict
), "Ben dispatched audit to Cy.")

BEN_2 = Turn("ben", "BEN2 review ship and complete its goal", (
    Decision("review_task", {"requestId": "ben-r1", "task": "ship", "verdict": "approve",
                             "notes": "looks good"}),
    Decision("complete_goal", {"requestId": "ben-c1", "task": "ship", "summary": "v1 shipped"}),
), "Ben completed ship.")

# The control plane's report into ana's session (the task came from there, not from ben's).
REPORT = Turn("ana", "REPORT", (), "Ana read the report.")

# Revoked mid-flight: the first call is held in the control plane while ben's grant is revoked.
BEN_3 = Turn("ben", "BEN3 add two more members", (
    _member("ben-m3", "Dee"),
    _member("ben-m4", "Eve"),
), "Ben was stopped.")

# After the revocation the runner has disposed the lease and unbound the plugin: the model's
# call never leaves Hermes.
BEN_4 = Turn("ben", "BEN4 try once more", (_member("ben-m5", "Fay"),), "Ben has no team tools.")

TURNS: tuple[Turn, ...] = (ANA_1, BEN_1, BEN_2, REPORT, BEN_3, BEN_4)


@dataclass(frozen=True)
class Expected:
    model_calls: int = sum(len(t.calls) for t in TURNS)            # 16
    # every call up to the revocation reached the runner's listener and the `tool` relay
    relayed: int = model_calls - len(BEN_4.calls)                  # 15
    refused_by_hub: int = 1        # Eve: the hub lease was gone (410 runner_lease_expired)
    reached_world: int = relayed - refused_by_hub                  # 14
    executed: int = 11             # 5 by ana, 4 + 2 by ben
    replayed: int = 1              # ana-m1 again
    refused_by_world: int = 2      # ben-m1 with other input, Dee (revoked while held)
    members: tuple[str, ...] = ("Ada", "Bo", "Cy")
    teams: tuple[str, ...] = ("core", "ops")
    reports: int = 1


EXPECTED = Expected()


def tool_name(admin: str, op: str) -> str:
    """The catalogue name of ``op`` in ``admin``'s grant (``fake_server.team.tool_name``)."""
    return f"{admin}_{op}"


def scripted_hermes_script() -> dict[str, Any]:
    """The scenario as a ``fixtures.hermes`` script (``team_tool`` steps by catalogue name)."""
    rules = []
    for t in TURNS:
        steps: list[dict[str, Any]] = [
            {"name": f"{t.prefix}-{i + 1}", "team_tool": tool_name(t.admin, d.op),
             "arguments": d.arguments} for i, d in enumerate(t.calls)]
        steps.append({"say": t.say})
        rules.append({"name": t.prefix.lower(), "match": {"prefix": t.prefix}, "steps": steps})
    return {"version": 1, "description": "issue 12 acceptance (conformance/acceptance)",
            "rules": rules}


def model_server_script() -> Any:
    """The scenario as a ``fixtures.real_hermes.Script`` (``Call`` resolved by ``_<op>`` suffix
    among the tools Hermes offers the session: only its own grant's)."""
    from fixtures.real_hermes import Call, Rule, Say, Script

    return Script(rules=tuple(
        Rule(t.prefix, tuple(Call(tool_name(t.admin, d.op), dict(d.arguments)) for d in t.calls)
             + (Say(t.say),)) for t in TURNS))
