"""The team tools a grant hands out with ``lease.create`` (the ``catalog`` rows) and their
argument schemas (sans-IO).

Rules:
- One row per operation of ``OPS``: ``{id, name, description, inputSchema}``. ``inputSchema`` is
  a JSON Schema (draft 2020-12) that is what actually validates a relayed call
  (``validate_arguments``); unknown keys are refused (``additionalProperties: false``).
- Every mutating operation takes a ``requestId``: the same id with the same input gives the same
  answer and creates nothing twice; with other input → 409 ``idempotency_conflict``.
  ``get_task`` only reads and takes none.
- Names and ids are distinct per grant: a grant's ``tag`` prefixes the tool name
  (``<tag>_create_member``; a plugin then makes it ``yaoyao_workspace_…``) and sits in the real
  id (``workspace.<tag>.create_member``), so two concurrent grants never share a name or an id.
  The runner hands the model opaque ids (``team_<hex>``) for the real ones.
- Errors never echo the arguments.
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any

from . import codes as tc
from .codes import TeamError

TAG_PATTERN = re.compile(r"^[a-z][a-z0-9]{0,15}$")
_NAME = {"type": "string", "minLength": 1, "maxLength": 64}
_TEXT = {"type": "string", "minLength": 1, "maxLength": 2000}
_REQUEST_ID = {"type": "string", "minLength": 1, "maxLength": 128,
               "description": "Idempotency key: repeat it to retry the same step safely."}
_VERSION = {"type": "integer", "minimum": 1,
            "description": "The task version you read; refused if the task changed since."}


def _schema(required: list[str], **props: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": props, "required": required,
            "additionalProperties": False}


@dataclass(frozen=True)
class Op:
    name: str
    description: str
    schema: dict[str, Any]
    mutates: bool = True


OPS: tuple[Op, ...] = (
    Op("create_member", "Create a member: a bot bound to a Hermes profile.",
       _schema(["requestId", "name", "profile"], requestId=_REQUEST_ID, name=_NAME,
               profile=_NAME)),
    Op("form_team", "Form a team of existing members.",
       _schema(["requestId", "name", "members"], requestId=_REQUEST_ID, name=_NAME,
               members={"type": "array", "items": _NAME, "minItems": 1, "maxItems": 32,
                        "uniqueItems": True})),
    Op("create_task", "Create a task with a goal for a team.",
       _schema(["requestId", "team", "title", "goal"], requestId=_REQUEST_ID, team=_NAME,
               title=_NAME, goal=_TEXT)),
    Op("assign_task", "Dispatch a task to a member of its team.",
       _schema(["requestId", "task", "member"], requestId=_REQUEST_ID, task=_NAME,
               member=_NAME, expectedVersion=_VERSION)),
    Op("review_task", "Review the assignee's work: approve, or ask for changes.",
       _schema(["requestId", "task", "verdict"], requestId=_REQUEST_ID, task=_NAME,
               verdict={"enum": ["approve", "changes"]}, notes=_TEXT,
               expectedVersion=_VERSION)),
    Op("complete_goal", "Complete an approved task's goal and report back to the session "
       "that created the task.",
       _schema(["requestId", "task", "summary"], requestId=_REQUEST_ID, task=_NAME,
               summary=_TEXT, expectedVersion=_VERSION)),
    Op("get_task", "Read a task (state, version, assignee).",
       _schema(["task"], task=_NAME), mutates=False),
)
OPS_BY_NAME: dict[str, Op] = {op.name: op for op in OPS}


@functools.cache
def _validators() -> dict[str, Any]:
    """One validator per op, each schema checked first; built at the first relayed call, not at
    import (jsonschema and the checks are ~0.1 s of every process that imports fake_server)."""
    from jsonschema import Draft202012Validator

    for op in OPS:
        Draft202012Validator.check_schema(op.schema)
    return {op.name: Draft202012Validator(op.schema) for op in OPS}


def tool_id(tag: str, op: str) -> str:
    return f"workspace.{tag}.{op}"


def tool_name(tag: str, op: str) -> str:
    return f"{tag}_{op}"


def catalogue(tag: str) -> list[dict[str, Any]]:
    """The ``catalog`` rows of one grant (``tag``: 1–16 of ``[a-z0-9]``, starting with a letter)."""
    if not TAG_PATTERN.match(tag):
        raise ValueError("grant tag must match " + TAG_PATTERN.pattern)
    return [{"id": tool_id(tag, op.name), "name": tool_name(tag, op.name),
             "description": op.description, "inputSchema": op.schema} for op in OPS]


def op_of(tag: str, real_id: str) -> Op:
    """The operation a real tool id of grant ``tag`` names; ``team_tool_unknown`` otherwise."""
    prefix = f"workspace.{tag}."
    op = OPS_BY_NAME.get(real_id[len(prefix):]) if real_id.startswith(prefix) else None
    if op is None:
        raise TeamError(tc.TEAM_TOOL_UNKNOWN)
    return op


def validate_arguments(op: str, arguments: Any) -> dict[str, Any]:
    """``arguments`` if they satisfy the op's schema; ``team_invalid_arguments`` otherwise."""
    if not isinstance(arguments, dict) or not _validators()[op].is_valid(arguments):
        raise TeamError(tc.TEAM_INVALID_ARGUMENTS)
    return arguments
