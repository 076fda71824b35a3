"""Admin API and admin web page (owned by the admin-flow work; stub until then)."""
from __future__ import annotations

from typing import Any

from aiohttp import web


def setup_admin(app: web.Application, cp: Any) -> None:
    """Mount the admin API and page on ``app``. ``cp`` is the ControlPlane."""
