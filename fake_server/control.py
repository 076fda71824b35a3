"""Deprecated name of ``fake_server.plane`` (kept so older imports keep working)."""

from .plane import CommandFailed, ControlPlane, Registration

__all__ = ["CommandFailed", "ControlPlane", "Registration"]
