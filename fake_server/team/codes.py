"""Every error code the team world answers (a relayed tool call that the world refuses).

Rules:
- One table for ``fake_server.team``; rows use ``fake_server.codes.Code``. A refusal names a row
  constant and is raised as ``TeamError(ROW)``; the handler edge turns it into ``ToolError`` (an HTTP
  status + ``{error, code}`` on the ``tool`` route), which the runner wraps as an ``isError``
  envelope for the model.
- Messages are fixed: they never echo arguments (a name, a goal or a request id).
"""
from __future__ import annotations

from fake_server.codes import Code, code_table

TEAM_INVALID_ARGUMENTS = Code("team_invalid_arguments", 400, "tool arguments do not match the tool's schema")
TEAM_IDEMPOTENCY_CONFLICT = Code("idempotency_conflict", 409, "id reused with different content")
TEAM_MEMBER_EXISTS = Code("team_member_exists", 409, "a member with that name exists")
TEAM_TEAM_EXISTS = Code("team_team_exists", 409, "a team with that name exists")
TEAM_TASK_EXISTS = Code("team_task_exists", 409, "a task with that title exists")
TEAM_MEMBER_NOT_FOUND = Code("team_member_not_found", 404, "no such member")
TEAM_TEAM_NOT_FOUND = Code("team_team_not_found", 404, "no such team")
TEAM_TASK_NOT_FOUND = Code("team_task_not_found", 404, "no such task")
TEAM_PROFILE_FORBIDDEN = Code("team_profile_forbidden", 403, "profile not allowed for this grant")
TEAM_NOT_A_MEMBER = Code("team_not_a_member", 409, "the member is not in the task's team")
TEAM_TASK_STATE = Code("team_task_state", 409, "the task is not in a state that allows this step")
TEAM_VERSION_CONFLICT = Code("team_version_conflict", 409, "the task changed since it was read")
TEAM_GRANT_REVOKED = Code("team_grant_revoked", 403, "team tool grant revoked")
TEAM_TOOL_UNKNOWN = Code("team_tool_unknown", 404, "tool not found")

TEAM_CODES: dict[str, Code] = code_table(
    TEAM_INVALID_ARGUMENTS, TEAM_IDEMPOTENCY_CONFLICT, TEAM_MEMBER_EXISTS, TEAM_TEAM_EXISTS,
    TEAM_TASK_EXISTS, TEAM_MEMBER_NOT_FOUND, TEAM_TEAM_NOT_FOUND, TEAM_TASK_NOT_FOUND,
    TEAM_PROFILE_FORBIDDEN, TEAM_NOT_A_MEMBER, TEAM_TASK_STATE, TEAM_VERSION_CONFLICT,
    TEAM_GRANT_REVOKED, TEAM_TOOL_UNKNOWN,
)


class TeamError(Exception):
    """A refusal of the team world: a row of ``TEAM_CODES``."""

    def __init__(self, row: Code) -> None:
        super().__init__(row.message)
        self.code, self.status, self.message = row.code, row.status, row.message
