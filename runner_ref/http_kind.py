"""The ``http`` command kind (protocol 1 §3 http): a read-only proxy to the local Hermes.

The rules are :mod:`runner_ref.http_plan` (sans-IO); this module GETs the planned path from
Hermes and answers ``{status, headers, body: <base64>}``, with Hermes' body capped at 8 MiB
(``hermes_response_too_large``, 502, above it).
"""
from __future__ import annotations

import base64
from typing import Any

from .hermes import HermesClient
from .http_plan import plan_http

PASSED_HEADERS = ("content-type", "content-disposition", "cache-control", "etag", "last-modified")


async def run_http(payload: dict[str, Any], hermes: HermesClient,
                   allowed_profiles: tuple[str, ...],
                   artifact_roots: tuple[str, ...]) -> dict[str, Any]:
    path, query = plan_http(payload, allowed_profiles, artifact_roots)
    status, headers, body = await hermes.request("GET", path, params=query or None)
    return {
        "status": status,
        "headers": {k: headers[k] for k in PASSED_HEADERS if k in headers},
        "body": base64.b64encode(body).decode("ascii"),
    }
