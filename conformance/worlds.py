"""``open_world``: the one factory of worlds, scripted or real (the ``world`` fixture calls it).

It lives apart from both kinds of world so that neither imports the other.
"""

from __future__ import annotations

from typing import Any

from .real_world import RealWorld
from .world import World


def open_world(runner_cmd: str | None = None, *, hermes: str = "scripted", seed: int | None = None,
               **options: Any) -> World:
    """The ``world`` fixture's factory: ``async with open_world(cmd, **options) as world``.

    ``hermes`` and ``seed`` are what the plugin's fixture passes. ``hermes="scripted"`` builds
    a :class:`conformance.world.World` (the seed is not used yet; a ``model_script`` option, meant
    for a real Hermes, is dropped); ``"real"`` or ``"real:PATH"`` builds a
    :class:`conformance.real_world.RealWorld` (a real Hermes Agent and a scripted model)."""
    del seed
    if hermes.startswith("real"):
        return RealWorld(runner_cmd, hermes=hermes, **options)
    if hermes != "scripted":
        raise ValueError(f"hermes must be scripted or real[:PATH], not {hermes!r}")
    options.pop("model_script", None)
    return World(runner_cmd, **options)
