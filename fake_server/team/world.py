"""The team world: members (bots bound to profiles), teams, tasks with a goal, and the reports
that go back to the session a task came from (sans-IO: no sockets, no clock, no tasks).

Rules:
- ``TeamWorld.apply(actor, op, arguments)`` is the only way in. It validates the arguments
  against the op's schema (``catalogue.validate_arguments``), then runs the op as one step: it
  either changes the world and answers, or raises ``TeamError`` and changes nothing.
- Idempotency by request id, per actor (an administrator): the first success of
  ``(actor, requestId)`` is stored with the fingerprint of ``{op, arguments}`` (canonical JSON,
  keys sorted). The same id with the same fingerprint → the stored answer again, nothing created
  twice (counted in ``replays``); with another fingerprint → ``idempotency_conflict``. Refusals
  are not stored: a refused step may be retried with the same id once the world allows it.
- No lost update: every successful mutation bumps ``revision`` and the task's ``version``; the
  task steps take an optional ``expectedVersion`` (compare-and-set → ``team_version_conflict``).
  Callers that interleave (the async handler edge) hold one lock per world around ``apply``.
- Names are unique per kind (members, teams, task titles); references are by name.
- A member is created only for a profile the actor's grant allows (``team_profile_forbidden``);
  a task is dispatched only to a member of its team (``team_not_a_member``).
- ``complete_goal`` appends a ``Report`` for the task's origin (the administrator and session
  that created the task) to ``outbox``; the delivery edge sends it into that session.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from typing import Any

from . import codes as tc
from . import lifecycle
from .catalogue import OPS_BY_NAME, validate_arguments
from .codes import TeamError


@dataclass(frozen=True)
class Origin:
    """Where a step came from: the administrator and the session their grant is bound to."""

    admin: str
    session_id: str
    stored_session_id: str = ""


@dataclass(frozen=True)
class Actor:
    admin: str
    origin: Origin
    profiles: frozenset[str]


@dataclass
class Member:
    id: str
    name: str
    profile: str
    created_by: str


@dataclass
class Team:
    id: str
    name: str
    members: list[str]
    created_by: str


@dataclass
class Task:
    id: str
    title: str
    team: str
    goal: str
    origin: Origin
    state: str = lifecycle.OPEN
    version: int = 1
    assignee: str | None = None
    reviews: list[dict[str, str]] = field(default_factory=list)
    summary: str | None = None

    def view(self) -> dict[str, Any]:
        return {"id": self.id, "title": self.title, "team": self.team, "goal": self.goal,
                "state": self.state, "version": self.version, "assignee": self.assignee,
                "reviews": [dict(r) for r in self.reviews], "summary": self.summary,
                "createdBy": self.origin.admin}


@dataclass(frozen=True)
class Report:
    """A message for the session a task came from, once its goal is complete."""

    task_id: str
    origin: Origin
    text: str


def fingerprint(op: str, arguments: dict[str, Any]) -> str:
    canon = json.dumps({"op": op, "arguments": arguments}, sort_keys=True,
                       separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canon.encode()).hexdigest()


def report_text(task: Task, by: str) -> str:
    return (f"REPORT task {task.title}: goal complete by {by}. Goal: {task.goal}. "
            f"Summary: {task.summary}")


class TeamWorld:
    def __init__(self) -> None:
        self.members: dict[str, Member] = {}
        self.teams: dict[str, Team] = {}
        self.tasks: dict[str, Task] = {}
        self.revision = 0
        self.executions = 0          # successful mutations (state changed)
        self.replays = 0             # answers given again for a repeated request id
        self.refusals = 0
        self.ledger: dict[tuple[str, str], tuple[str, dict[str, Any]]] = {}
        self.outbox: list[Report] = []
        self.log: list[tuple[str, str, str]] = []   # (admin, op, requestId) per execution
        self._ids: dict[str, int] = {}

    # -- the one way in ------------------------------------------------------------------------

    def apply(self, actor: Actor, op: str, arguments: Any) -> dict[str, Any]:
        try:
            if op not in OPS_BY_NAME:
                raise TeamError(tc.TEAM_TOOL_UNKNOWN)
            args = validate_arguments(op, arguments)
            if not OPS_BY_NAME[op].mutates:
                return self._get_task(args)
            key = (actor.admin, str(args["requestId"]))
            fp = fingerprint(op, args)
            seen = self.ledger.get(key)
            if seen is not None:
                if seen[0] != fp:
                    raise TeamError(tc.TEAM_IDEMPOTENCY_CONFLICT)
                self.replays += 1
                return json.loads(json.dumps(seen[1]))
            answer = getattr(self, "_" + op)(actor, args)
        except TeamError:
            self.refusals += 1
            raise
        self.ledger[key] = (fp, json.loads(json.dumps(answer)))
        self.revision += 1
        self.executions += 1
        self.log.append((actor.admin, op, key[1]))
        return answer

    def snapshot(self) -> dict[str, Any]:
        return {"revision": self.revision,
                "members": {n: asdict(m) for n, m in self.members.items()},
                "teams": {n: asdict(t) for n, t in self.teams.items()},
                "tasks": {n: t.view() for n, t in self.tasks.items()}}

    def take_reports(self) -> list[Report]:
        out, self.outbox = self.outbox, []
        return out

    # -- operations (each either changes the world and answers, or raises first) ------------

    def _next_id(self, kind: str) -> str:
        self._ids[kind] = self._ids.get(kind, 0) + 1
        return f"{kind}_{self._ids[kind]}"

    def _create_member(self, actor: Actor, a: dict[str, Any]) -> dict[str, Any]:
        if a["name"] in self.members:
            raise TeamError(tc.TEAM_MEMBER_EXISTS)
        if a["profile"] not in actor.profiles:
            raise TeamError(tc.TEAM_PROFILE_FORBIDDEN)
        m = Member(self._next_id("member"), a["name"], a["profile"], actor.admin)
        self.members[m.name] = m
        return {"member": asdict(m)}

    def _form_team(self, actor: Actor, a: dict[str, Any]) -> dict[str, Any]:
        if a["name"] in self.teams:
            raise TeamError(tc.TEAM_TEAM_EXISTS)
        if any(n not in self.members for n in a["members"]):
            raise TeamError(tc.TEAM_MEMBER_NOT_FOUND)
        t = Team(self._next_id("team"), a["name"], list(a["members"]), actor.admin)
        self.teams[t.name] = t
        return {"team": asdict(t)}

    def _create_task(self, actor: Actor, a: dict[str, Any]) -> dict[str, Any]:
        if a["title"] in self.tasks:
            raise TeamError(tc.TEAM_TASK_EXISTS)
        if a["team"] not in self.teams:
            raise TeamError(tc.TEAM_TEAM_NOT_FOUND)
        t = Task(self._next_id("task"), a["title"], a["team"], a["goal"], actor.origin)
        self.tasks[t.title] = t
        return {"task": t.view()}

    def _task_for_step(self, a: dict[str, Any], step: str) -> tuple[Task, str]:
        task = self.tasks.get(a["task"])
        if task is None:
            raise TeamError(tc.TEAM_TASK_NOT_FOUND)
        if "expectedVersion" in a and a["expectedVersion"] != task.version:
            raise TeamError(tc.TEAM_VERSION_CONFLICT)
        return task, lifecycle.next_state(step, task.state)

    def _assign_task(self, actor: Actor, a: dict[str, Any]) -> dict[str, Any]:
        task, state = self._task_for_step(a, "assign")
        if a["member"] not in self.members:
            raise TeamError(tc.TEAM_MEMBER_NOT_FOUND)
        if a["member"] not in self.teams[task.team].members:
            raise TeamError(tc.TEAM_NOT_A_MEMBER)
        task.state, task.assignee, task.version = state, a["member"], task.version + 1
        return {"task": task.view()}

    def _review_task(self, actor: Actor, a: dict[str, Any]) -> dict[str, Any]:
        task, state = self._task_for_step(a, "review:" + a["verdict"])
        task.reviews.append({"by": actor.admin, "verdict": a["verdict"],
                             "notes": a.get("notes", "")})
        task.state, task.version = state, task.version + 1
        return {"task": task.view()}

    def _complete_goal(self, actor: Actor, a: dict[str, Any]) -> dict[str, Any]:
        task, state = self._task_for_step(a, "complete")
        task.state, task.summary, task.version = state, a["summary"], task.version + 1
        report = Report(task.id, task.origin, report_text(task, actor.admin))
        self.outbox.append(report)
        return {"task": task.view(), "reportTo": task.origin.admin}

    def _get_task(self, a: dict[str, Any]) -> dict[str, Any]:
        task = self.tasks.get(a["task"])
        if task is None:
            raise TeamError(tc.TEAM_TASK_NOT_FOUND)
        return {"task": task.view()}
