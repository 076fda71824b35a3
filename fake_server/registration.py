"""``Registration``: a registered runner's id and token, and its runner.json."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .records import RunnerRecord


@dataclass(frozen=True)
class Registration:
    """A registered runner: its id and its token (the only place the token exists)."""

    runner_id: str
    token: str = field(repr=False)
    server_url: str
    record: RunnerRecord

    def runner_config(
        self,
        hermes_url: str = "http://127.0.0.1:9119",
        artifact_roots: Sequence[str] = (),
        allowed_profiles: Sequence[str] | None = None,
        **extra: Any,
    ) -> dict[str, Any]:
        """The runner.json of protocol 1 §1.1 for this runner (serverURL = the control plane)."""
        cfg: dict[str, Any] = {
            "protocol": 1,
            "serverURL": self.server_url,
            "runnerId": self.runner_id,
            "token": self.token,
            "hermesURL": hermes_url,
            "allowedProfiles": list(allowed_profiles or self.record.allowed_profiles),
            "artifactRoots": list(artifact_roots),
        }
        cfg.update(extra)
        return cfg
