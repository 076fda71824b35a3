"""The ``tool`` route (the team-tool relay) and the ``/api/profiles`` answer filter.

Rules:
- Body strict (``tool_calls.parse_tool_body``); an unknown or inactive lease → 410
  ``runner_lease_expired``.
- The lease is asserted active BEFORE the call (its channel still valid, else the lease is
  dropped and 410) and AFTER it, as upstream's ``assertActive``: a call that finishes after the
  lease or its channel went answers 410 ``runner_lease_expired``, not ``{result}``.
- Dedupe by ``callId`` (``tool_calls.LeaseCalls``): a joined call shares the one execution,
  which runs as its own task so a runner that goes away cancels only its wait.
- Handler errors: ``ToolError`` → its status and code; any other exception → 502
  ``team_tool_failed``; no handler → 404 ``team_tool_not_found``.
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Awaitable, Callable
from typing import Any

from . import codes
from .codes import error_body
from .handles import Lease, ToolError
from .tool_calls import Decision as ToolDecision
from .tool_calls import parse_tool_body

Answer = tuple[int, dict[str, Any]]
EXPIRED: Answer = codes.refusal(codes.RUNNER_LEASE_EXPIRED)


async def tool_route(
    body: dict[str, Any], find_lease: Callable[[str], Lease | None],
    still_active: Callable[[Lease], Awaitable[bool]],
) -> Answer:
    """Answer one ``tool`` request; ``still_active`` is the hub's assertActive (it drops a lease
    whose channel is no longer valid)."""
    req = parse_tool_body(body)
    if isinstance(req, ToolDecision):
        return req.status, req.body or error_body(codes.INVALID_WORKSPACE_REQUEST)
    lease = find_lease(req.lease_id)
    if lease is None or not lease.active or not await still_active(lease):
        return EXPIRED
    d = lease.calls.begin(req.call_id, req.tool_id, req.arguments)
    if d.action == "reject":
        return d.status, d.body or error_body(d.code or codes.INVALID_WORKSPACE_REQUEST, d.message or None)
    assert d.record is not None
    if d.action == "join":
        fut = d.record.attachment
        if isinstance(fut, asyncio.Future):
            joined: Answer = await asyncio.shield(fut)
            return joined
        return d.record.outcome  # type: ignore[no-any-return]
    calls, call_id = lease.calls, req.call_id

    async def execute() -> Answer:
        answer = await run_tool(lease, req.tool_id, req.arguments)
        if not lease.active or not await still_active(lease):  # assertActive after the call
            answer = EXPIRED
        calls.finish(call_id, answer)
        return answer

    task = asyncio.ensure_future(execute())
    d.record.attachment = task
    return await asyncio.shield(task)


async def run_tool(lease: Lease, tool_id: str, arguments: dict[str, Any]) -> Answer:
    handler = lease.handlers.get(tool_id) or lease.handlers.get("*")
    if handler is None:
        return codes.refusal(codes.TEAM_TOOL_NOT_FOUND)
    try:
        value = handler(tool_id, arguments)
        if isinstance(value, Awaitable):
            value = await value
    except ToolError as e:
        return e.status, error_body(e.code, e.message)
    except Exception:  # a harness handler bug: answer, never crash
        return codes.refusal(codes.TEAM_TOOL_FAILED)
    return 200, {"result": value}


def filter_profiles(result: Any, allowed: frozenset[str] | set[str]) -> Any:
    """Filter a relayed ``/api/profiles`` answer (base64 JSON body) to ``allowed`` profiles."""
    if not isinstance(result, dict) or not isinstance(result.get("body"), str):
        return result
    try:
        data = json.loads(base64.b64decode(result["body"]))
    except (ValueError, TypeError):
        return result

    def keep(item: Any) -> bool:
        name = item if isinstance(item, str) else (
            item.get("name", item.get("id")) if isinstance(item, dict) else None
        )
        return name in allowed

    if isinstance(data, list):
        data = [i for i in data if keep(i)]
    elif isinstance(data, dict) and isinstance(data.get("profiles"), list):
        data = {**data, "profiles": [i for i in data["profiles"] if keep(i)]}
    else:
        return result
    body = base64.b64encode(json.dumps(data).encode()).decode()
    return {**result, "body": body}
