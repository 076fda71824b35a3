"""The ``http`` command kind's plan, sans-IO (protocol 1 §3 http).

Rules, in order:
1. ``/api/plugins/yaoyao-bot-bridge/memory-extract`` needs POST and ``computers`` → this runner
   has no VM, so 409 ``memory_extraction_unavailable``.
2. ``/api/computer/capabilities`` → ``requireProfile``, then 409 ``computer_unavailable``.
3. a ``computer`` target: ``/api/files/download`` → 409 ``computer_artifact_required``; session
   messages → 403 ``computer_unavailable`` (no VM here).
4. only GET of the paths in :data:`runner_ref.allowlists.HTTP_GET_PATHS` (403
   ``runner_http_forbidden``); the profile (search ``profile``, default ``default``) must be
   allowed except for status and profiles; downloads must resolve inside ``artifactRoots``
   (:mod:`runner_ref.paths`).
The answer is ``{status, headers, body: <base64>}``, with Hermes' body capped at 8 MiB
(``hermes_response_too_large``, 502, above it).
:mod:`runner_ref.http_kind` performs the plan's GET.
"""
from __future__ import annotations

from typing import Any
from urllib.parse import parse_qsl

from .allowlists import (
    COMPUTER_CAPABILITIES,
    DOWNLOAD,
    MEMORY_EXTRACT,
    SESSION_MESSAGES_RE,
    http_route,
    require_profile,
)
from .errors import CommandError
from .paths import contained_path


def parse_search(search: object) -> dict[str, str]:
    if search is None or search == "":
        return {}
    if not isinstance(search, str) or len(search) > 8192:
        raise CommandError("runner_error", "search must be a query string", 400)
    return dict(parse_qsl(search.removeprefix("?"), keep_blank_values=True))


def plan_http(payload: dict[str, Any], allowed_profiles: tuple[str, ...],
              artifact_roots: tuple[str, ...]) -> tuple[str, dict[str, str]]:
    """Sans-IO: the (path, query) to GET from Hermes, or the coded refusal."""
    path, method = payload.get("path"), payload.get("method")
    query = parse_search(payload.get("search"))
    if path == MEMORY_EXTRACT:
        raise CommandError("memory_extraction_unavailable", "memory extraction needs computers", 409)
    if path == COMPUTER_CAPABILITIES:
        require_profile(query.get("profile"), allowed_profiles)
        raise CommandError("computer_unavailable", "this runner has no computers", 409)
    if payload.get("computer") is not None and isinstance(path, str):
        if path == DOWNLOAD:
            raise CommandError("computer_artifact_required", "use a computer artifact", 409)
        if SESSION_MESSAGES_RE.match(path):
            raise CommandError("computer_unavailable", "this runner has no computers", 403)
    name, needs_profile = http_route(method, path)
    assert isinstance(path, str)
    if needs_profile:
        require_profile(query.get("profile"), allowed_profiles)
    if name == "download":
        query["path"] = contained_path(query.get("path"), artifact_roots)
    return path, query
