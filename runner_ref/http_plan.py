"""The ``http`` command kind's plan, sans-IO (protocol 1 §3 http).

Rules, in order:
1. ``/api/plugins/yaoyao-bot-bridge/memory-extract`` needs POST and ``computers`` → this runner
   has no VM, so 409 ``memory_extraction_unavailable``.
2. ``/api/computer/capabilities`` → ``requireProfile``, then 409 ``computer_unavailable``.
3. a ``computer`` target: ``/api/files/download`` → 409 ``computer_artifact_required``; session
   messages → 403 ``computer_unavailable``; any other path → 409 ``computer_unavailable`` (no VM
   here: a core runner refuses every request with a ``computer`` target).
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

from . import codes
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
from .timings import SEARCH_MAX


def parse_search(search: object) -> dict[str, str]:
    if search is None or search == "":
        return {}
    if not isinstance(search, str) or len(search) > SEARCH_MAX:
        raise CommandError.of(codes.RUNNER_ERROR, "search must be a query string")
    return dict(parse_qsl(search.removeprefix("?"), keep_blank_values=True))


def plan_http(payload: dict[str, Any], allowed_profiles: tuple[str, ...],
              artifact_roots: tuple[str, ...]) -> tuple[str, dict[str, str]]:
    """Sans-IO: the (path, query) to GET from Hermes, or the coded refusal."""
    path, method = payload.get("path"), payload.get("method")
    query = parse_search(payload.get("search"))
    if path == MEMORY_EXTRACT:
        raise CommandError.of(codes.MEMORY_EXTRACTION_UNAVAILABLE)
    if path == COMPUTER_CAPABILITIES:
        require_profile(query.get("profile"), allowed_profiles)
        raise CommandError.of(codes.COMPUTER_UNAVAILABLE)
    if payload.get("computer") is not None and isinstance(path, str):
        if path == DOWNLOAD:
            raise CommandError.of(codes.COMPUTER_ARTIFACT_REQUIRED)
        if SESSION_MESSAGES_RE.match(path):
            raise CommandError.of(codes.COMPUTER_MESSAGES_UNAVAILABLE)
        raise CommandError.of(codes.COMPUTER_UNAVAILABLE)   # any other path: no VM here
    name, needs_profile = http_route(method, path)
    assert isinstance(path, str)
    if needs_profile:
        require_profile(query.get("profile"), allowed_profiles)
    if name == "download":
        query["path"] = contained_path(query.get("path"), artifact_roots)
    return path, query
