"""Calls on the sans-IO artifact upload machine, as the artifact tests make them: begin, append
and finish bodies of one upload on a channel, and the (status, code) of a reply."""
from __future__ import annotations

import base64
import hashlib
from typing import Any

from fake_server.artifacts import ArtifactUploads

CH = "00000000-0000-4000-8000-000000000001"  # version 4, variant 8: valid for zod 4
CH2 = "00000000-0000-4000-8000-000000000002"


def uid(n: int) -> str:
    return f"00000000-0000-4000-a000-{1000 + n:012x}"


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def begin(u: ArtifactUploads, upload: str, data: bytes, ch: str = CH, now: float = 0.0,
          **kw: Any) -> Any:
    body = {"connectionId": ch, "id": upload, "phase": "begin", "name": "out.txt",
            "size": len(data), "digest": sha(data)} | kw
    return u.handle(body, channel_ok=True, now=now)


def append(u: ArtifactUploads, upload: str, index: int, chunk: bytes, ch: str = CH,
           now: float = 0.0) -> Any:
    body = {"connectionId": ch, "id": upload, "phase": "append", "index": index,
            "data": b64(chunk)}
    return u.handle(body, channel_ok=True, now=now)


def finish(u: ArtifactUploads, upload: str, ch: str = CH, now: float = 0.0) -> Any:
    return u.handle({"connectionId": ch, "id": upload, "phase": "finish"}, channel_ok=True,
                    now=now)


def code(reply: Any) -> tuple[int, str | None]:
    status, body = reply
    return status, body.get("code")
