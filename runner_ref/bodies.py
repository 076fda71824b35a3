"""Reading an HTTP response body whole, up to a cap.

Rule: ``StreamReader.read(n)`` returns whatever is buffered (often 64 KiB), not ``n`` bytes, so a
body is read to its end; a declared ``Content-Length`` over the cap is refused before reading,
an undeclared (chunked) body is streamed and refused as soon as it passes the cap.
"""
from __future__ import annotations

import aiohttp


async def read_capped(resp: aiohttp.ClientResponse, cap: int) -> bytes | None:
    """The whole body, or None if it is longer than ``cap`` bytes."""
    declared = resp.content_length
    if declared is not None:
        return await resp.content.read() if declared <= cap else None
    parts: list[bytes] = []
    size = 0
    async for chunk in resp.content.iter_any():
        size += len(chunk)
        if size > cap:
            return None
        parts.append(chunk)
    return b"".join(parts)
