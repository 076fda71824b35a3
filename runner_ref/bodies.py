"""Reading an HTTP response body whole, up to a cap.

Rule: ``StreamReader.read(n)`` returns whatever is buffered (often 64 KiB), not ``n`` bytes, so a
body is read chunk by chunk to its end; more than ``cap`` bytes → None (the caller refuses it).
A declared ``Content-Length`` over the cap is refused before reading anything.
"""
from __future__ import annotations

import aiohttp


async def read_capped(resp: aiohttp.ClientResponse, cap: int) -> bytes | None:
    """The whole body, or None if it is longer than ``cap`` bytes."""
    declared = resp.content_length
    if declared is not None and declared > cap:
        return None
    first = await resp.content.read()  if declared is not None and declared <= 65536 else b""
    if declared is not None and declared <= 65536:
        return first if len(first) <= cap else None
    parts: list[bytes] = []
    size = 0
    async for chunk in resp.content.iter_any():
        size += len(chunk)
        if size > cap:
            return None
        parts.append(chunk)
    return b"".join(parts)
