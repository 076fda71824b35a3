"""Every error code the team world answers (a relayed tool call that the world refuses).

Rules:
- One table for ``fake_server.team``; rows use ``fake_server.codes.Code``. A refusal names a row
  and is raised as ``TeamError(code)``; the handler edge turns it into ``ToolError`` (an HTTP
  status + ``{error, code}`` on the ``tool`` route), which the runner wraps as an ``isError``
  envelope for the model.
- Messages are fixed: they never echo arguments (a name, a goal or a request id).
"""
from __future__ import annotations

from fake_server.codes import Code, code_table

TEAM_CODES: dict[str, Code] = code_table(
    Code("team_invalid_arguments", 400, "tool arguments do not match the tool's schema"),
    Code("idempotency_conflict", 409, "id reused with different content"),
    Code("team_member_exists", 409, "a member with that name exists"),
    Code("team_team_exists", 409, "a team with that name exists"),
    Code("team_task_exists", 409, "a task with that title exists"),
    Code("team_member_not_found", 404, "no such member"),
    Code("team_team_not_found", 404, "no such team"),
    Code("team_task_not_found", 404, "no such task"),
    Code("team_profile_forbidden", 403, "profile not allowed for this grant"),
    Code("team_not_a_member", 409, "the member is not in the task's team"),
    Code("team_task_state", 409, "the task is not in a state that allows this step"),
    Code("team_version_conflict", 409, "the task changed since it was read"),
    Code("team_grant_revoked", 403, "team tool grant revoked"),
    Code("team_tool_unknown", 404, "tool not found"),
)


class TeamError(Exception):
    """A refusal of the team world; ``code`` names a row of ``TEAM_CODES``."""

    def __init__(self, code: str) -> None:
        row = TEAM_CODES[code]
        super().__init__(row.message)
        self.code, self.status, self.message = row.code, row.status, row.message
