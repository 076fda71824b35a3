"""The team world of the simulated control plane (issue 12): members (bots bound to profiles),
teams, tasks with a goal and their lifecycle, the team-tool catalogue handed out with
``lease.create``, and the handlers that execute calls relayed through the runner's ``tool``
route. See docs/acceptance.md.

``from fake_server.team import TeamDesk, TeamWorld, Origin, catalogue``
"""
from .catalogue import OPS, catalogue, tool_id, tool_name
from .codes import TEAM_CODES, TeamError
from .grants import Delivery, GrantStats, Hold, TeamDesk, TeamGrant
from .lifecycle import TRANSITIONS
from .world import Actor, Origin, Report, TeamWorld

__all__ = [
    "OPS", "TEAM_CODES", "TRANSITIONS", "Actor", "Delivery", "GrantStats", "Hold", "Origin",
    "Report", "TeamDesk", "TeamError", "TeamGrant", "TeamWorld", "catalogue", "tool_id",
    "tool_name",
]
