"""Chunked artifact uploads on the control plane (route ``artifact``), as a sans-IO machine.

Rules of this module
--------------------
* Everything that decides an ``artifact`` request lives here; the aiohttp handler only parses
  JSON, runs the machine-API gates, and translates the returned ``Reply`` into HTTP.
* No I/O, no clock of its own: the caller passes ``now`` (seconds, any monotonic origin).
* One ``ArtifactUploads`` object per runner. Upload ids are scoped to the runner; the
  ``connectionId`` given at ``begin`` is part of the upload's metadata.
* Limits come from ``timings.Limits`` (the one table of sizes); refusals are rows of
  ``codes.CODES`` built with ``error_body``; nothing raises.

Theory of operation (upstream ``runnerHub.ts``, route ``artifact``)
-------------------------------------------------------------------
A body is checked in this order (first failure wins)::

    1 shape   strict keys & types, as upstream's zod 4 schema   400 invalid_workspace_request
    2 channel connectionId valid & owned by runner               403 artifact_forbidden
    3 phase   begin | append | finish (below)

Shape: ``connectionId`` and ``id`` are RFC 9562 UUIDs as zod 4 checks them (version 1-8,
variant 8/9/a/b, either case, or the nil / max UUID); ``name`` 1-240 UTF-16 units; ``size`` an
integer 0-25 MiB; ``digest`` lower-case sha256 hex; ``index`` an integer ≥ 0; ``data`` a string
of at most 1,048,576 UTF-16 units (the limit is on the base64 **text**, so a chunk decodes to at
most 786,432 bytes).

``begin``  needs ``name``, ``size``, ``digest`` (else 400 artifact_invalid). A known id with the
           same metadata (channel, name, size, digest) is an idempotent repeat; different
           metadata → 409 idempotency_conflict. A new upload needs fewer than 8 uploads on its
           channel, finished ones included, and ≤ 64 MiB of declared unfinished bytes per runner
           (429 artifact_limit).
``append`` unknown id (or id of another channel) → 404 artifact_missing; no ``index`` or
           ``data``, or the upload is already finished → 400 artifact_invalid. ``data`` is
           decoded as Node's ``Buffer.from(data, "base64")``: characters outside the base64 and
           base64url alphabets (whitespace included) are skipped, decoding stops at the first
           ``=``. ``index < next``: a resend, must carry the same bytes (else 409
           idempotency_conflict). ``index > next`` or bytes past the declared size → 409
           artifact_invalid. ``index == next`` stores the chunk (an empty chunk too).
``finish`` unknown → 404 artifact_missing; fewer bytes than declared → 409 artifact_incomplete;
           sha256 mismatch → 409 artifact_digest_mismatch (the upload is kept, so a repeated
           finish answers the same); otherwise the file is published exactly once and every
           repeated finish returns the same result.

Success body: ``{"ok": true, "next": <int>}`` plus ``"result"`` once finished (upstream's
``result`` is undefined until then, so JSON leaves the key out). ``next`` is the index of the
next chunk the server expects (= chunks stored so far). ⚑ ``result`` after finish is
``{"name", "size", "digest"}``: upstream returns whatever ``publishArtifact`` gives.
⚑ Idle uploads (finished or not) are dropped by ``sweep(now)`` after ``orphan_after`` seconds;
upstream drops them once their connection is gone (5 s tick) and keeps finished ones while it
lives. ⚑ Upstream's channel must also be able to publish (``publishArtifact``); here any valid
channel can.

Public API (used by the aiohttp handler and the harness)::

    uploads = ArtifactUploads(limits=Limits(), orphan_after=300.0, on_publish=None)
    reply = uploads.handle(body, channel_ok=lambda cid: ..., now=clock())  # -> Reply
    status, payload = reply                       # Reply is a NamedTuple (status, body)
    uploads.published                             # list[PublishedArtifact], in publish order
    uploads.sweep(now) -> int                     # drop idle uploads; number dropped
    uploads.drop_channel(connection_id) -> int    # channel closed: drop its uploads
    uploads.drop_runner() -> int                  # runner disconnected / new epoch: drop all
    uploads.unfinished_bytes, uploads.active(connection_id=None)
"""
from __future__ import annotations

import base64
import hashlib
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from . import codes
from .codes import Code, error_body
from .timings import Limits, Timings
from .tool_calls import js_length

#: zod 4's ``z.string().uuid()``: RFC 9562 (version 1-8, variant 8/9/a/b) or the nil / max UUID.
ZOD_UUID_RE = re.compile(
    r"^([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[1-8][0-9a-fA-F]{3}-[89abAB][0-9a-fA-F]{3}-[0-9a-fA-F]{12}"
    r"|00000000-0000-0000-0000-000000000000|ffffffff-ffff-ffff-ffff-ffffffffffff)$"
)
_HEX64 = re.compile(r"^[0-9a-f]{64}$")
_PHASES = ("begin", "append", "finish")
#: Refusal name → (HTTP status, the code's row, message); ``None`` message: the row's.
#: ``artifact_invalid`` is sent with its row's 400 and, for a chunk, with 409 (upstream's choice).
ERRORS: dict[str, tuple[int, Code, str | None]] = {
    "shape": (400, codes.INVALID_WORKSPACE_REQUEST, None),
    "forbidden": (403, codes.ARTIFACT_FORBIDDEN, None),
    "invalid_begin": (400, codes.ARTIFACT_INVALID, "artifact begin needs name, size and digest"),
    "invalid_append": (400, codes.ARTIFACT_INVALID,
                       "artifact append needs index and data, before finish"),
    "conflict": (409, codes.IDEMPOTENCY_CONFLICT, None),
    "limit": (429, codes.ARTIFACT_LIMIT, None),
    "missing": (404, codes.ARTIFACT_MISSING, None),
    "invalid_chunk": (409, codes.ARTIFACT_INVALID,
                      "artifact chunk out of order or over the declared size"),
    "incomplete": (409, codes.ARTIFACT_INCOMPLETE, None),
    "digest": (409, codes.ARTIFACT_DIGEST_MISMATCH, None),
}


def _is_int(v: object) -> bool:
    """A JSON number that is an integer (JS has one number type: 5.0 is an integer)."""
    if isinstance(v, bool):
        return False
    if isinstance(v, int):
        return True
    return isinstance(v, float) and math.isfinite(v) and v.is_integer()


#: Shape checks as data: key → predicate(value, limits). Keys not listed here are refused.
FIELDS: dict[str, Callable[[Any, Limits], bool]] = {
    "connectionId": lambda v, _l: isinstance(v, str) and bool(ZOD_UUID_RE.match(v)),
    "id": lambda v, _l: isinstance(v, str) and bool(ZOD_UUID_RE.match(v)),
    "phase": lambda v, _l: isinstance(v, str) and v in _PHASES,
    "name": lambda v, _l: isinstance(v, str) and 1 <= js_length(v) <= 240,
    "size": lambda v, lim: _is_int(v) and 0 <= v <= lim.artifact_size,
    "digest": lambda v, _l: isinstance(v, str) and bool(_HEX64.match(v)),
    "index": lambda v, _l: _is_int(v) and 0 <= v <= 2**53 - 1,
    "data": lambda v, lim: isinstance(v, str) and js_length(v) <= lim.artifact_chunk,
}
REQUIRED = ("connectionId", "id", "phase")
#: Fields a phase needs beyond the shape (missing → the phase's error).
PHASE_NEEDS: dict[str, tuple[tuple[str, ...], str]] = {
    "begin": (("name", "size", "digest"), "invalid_begin"),
    "append": (("index", "data"), "invalid_append"),
    "finish": ((), "invalid_append"),
}


class Reply(NamedTuple):
    """A decision: HTTP status and JSON body."""

    status: int
    body: dict[str, Any]

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300


@dataclass(frozen=True)
class PublishedArtifact:
    """One published file (what the harness reads)."""

    upload_id: str
    connection_id: str
    name: str
    size: int
    digest: str
    data: bytes
    at: float


@dataclass
class _Upload:
    upload_id: str
    connection_id: str
    name: str
    size: int
    digest: str
    chunks: list[bytes] = field(default_factory=list)
    chunk_digests: list[bytes] = field(default_factory=list)
    received: int = 0
    last: float = 0.0
    result: dict[str, Any] | None = None

    @property
    def meta(self) -> tuple[str, str, int, str]:
        return (self.connection_id, self.name, self.size, self.digest)

    @property
    def finished(self) -> bool:
        return self.result is not None


def _error(name: str) -> Reply:
    status, row, message = ERRORS[name]
    return Reply(status, error_body(row, message))


def _ok(upload: _Upload) -> Reply:
    body: dict[str, Any] = {"ok": True, "next": len(upload.chunk_digests)}
    if upload.result is not None:
        body["result"] = upload.result
    return Reply(200, body)


_NOT_B64 = re.compile(r"[^A-Za-z0-9+/\-_=]")
_URL_SAFE = str.maketrans("-_", "+/")


def node_base64(data: str) -> bytes:
    """``Buffer.from(data, "base64")``: skip characters outside both alphabets, accept ``-_``,
    stop at the first ``=``; a lone trailing sextet yields no byte. Never fails."""
    text = _NOT_B64.sub("", data).split("=", 1)[0].translate(_URL_SAFE)
    if len(text) % 4 == 1:
        text = text[:-1]
    return base64.b64decode(text + "=" * (-len(text) % 4))


class ArtifactUploads:
    """All artifact uploads of one runner."""

    def __init__(
        self,
        limits: Limits | None = None,
        orphan_after: float = Timings.artifact_orphan_after,
        on_publish: Callable[[PublishedArtifact], None] | None = None,
    ) -> None:
        self.limits = limits or Limits()
        self.orphan_after = orphan_after
        self.on_publish = on_publish
        self.published: list[PublishedArtifact] = []
        self._uploads: dict[str, _Upload] = {}

    # -- queries ---------------------------------------------------------------------------
    @property
    def unfinished_bytes(self) -> int:
        """Declared bytes of all unfinished uploads of this runner."""
        return sum(u.size for u in self._uploads.values() if not u.finished)

    def active(self, connection_id: str | None = None) -> list[str]:
        """Ids of unfinished uploads (of one channel, or all)."""
        return [
            u.upload_id
            for u in self._uploads.values()
            if not u.finished and (connection_id is None or u.connection_id == connection_id)
        ]

    # -- the machine -----------------------------------------------------------------------
    def handle(
        self, body: object, *, channel_ok: bool | Callable[[str], bool], now: float
    ) -> Reply:
        """Decide one ``artifact`` request body (already JSON-parsed)."""
        if not self._shape_ok(body):
            return _error("shape")
        assert isinstance(body, dict)
        cid: str = body["connectionId"]
        allowed = channel_ok(cid) if callable(channel_ok) else channel_ok
        if not allowed:
            return _error("forbidden")
        phase: str = body["phase"]
        needs, err = PHASE_NEEDS[phase]
        if any(k not in body for k in needs):
            return _error(err)
        return _PHASE_HANDLERS[phase](self, body, now)

    def _shape_ok(self, body: object) -> bool:
        if not isinstance(body, dict):
            return False
        if any(k not in body for k in REQUIRED):
            return False
        for key, value in body.items():
            check = FIELDS.get(key)
            if check is None or not check(value, self.limits):
                return False
        return True

    def _begin(self, body: dict[str, Any], now: float) -> Reply:
        uid: str = body["id"]
        meta = (body["connectionId"], body["name"], int(body["size"]), body["digest"])
        known = self._uploads.get(uid)
        if known is not None:
            if known.meta != meta:
                return _error("conflict")
            known.last = now
            return _ok(known)
        cid = meta[0]
        on_channel = sum(1 for u in self._uploads.values() if u.connection_id == cid)
        if on_channel >= self.limits.artifacts_per_channel:
            return _error("limit")
        if self.unfinished_bytes + meta[2] > self.limits.artifact_unfinished:
            return _error("limit")
        upload = _Upload(uid, cid, meta[1], meta[2], meta[3], last=now)
        self._uploads[uid] = upload
        return _ok(upload)

    def _lookup(self, body: dict[str, Any]) -> _Upload | None:
        upload = self._uploads.get(body["id"])
        if upload is None or upload.connection_id != body["connectionId"]:
            return None
        return upload

    def _append(self, body: dict[str, Any], now: float) -> Reply:
        upload = self._lookup(body)
        if upload is None:
            return _error("missing")
        if upload.finished:
            return _error("invalid_append")
        index = int(body["index"])
        chunk = node_base64(body["data"])
        upload.last = now
        stored = len(upload.chunk_digests)
        if index < stored:
            if hashlib.sha256(chunk).digest() != upload.chunk_digests[index]:
                return _error("conflict")
            return _ok(upload)
        if index > stored or upload.received + len(chunk) > upload.size:
            return _error("invalid_chunk")
        upload.chunks.append(chunk)
        upload.chunk_digests.append(hashlib.sha256(chunk).digest())
        upload.received += len(chunk)
        return _ok(upload)

    def _finish(self, body: dict[str, Any], now: float) -> Reply:
        upload = self._lookup(body)
        if upload is None:
            return _error("missing")
        upload.last = now
        if upload.finished:
            return _ok(upload)
        if upload.received < upload.size:
            return _error("incomplete")
        data = b"".join(upload.chunks)
        if hashlib.sha256(data).hexdigest() != upload.digest:
            return _error("digest")  # kept, as upstream: a repeated finish answers the same
        upload.chunks = []
        upload.result = {"name": upload.name, "size": upload.size, "digest": upload.digest}
        record = PublishedArtifact(
            upload.upload_id, upload.connection_id, upload.name, upload.size, upload.digest,
            data, now,
        )
        self.published.append(record)
        if self.on_publish is not None:
            self.on_publish(record)
        return _ok(upload)

    # -- lifecycle -------------------------------------------------------------------------
    def sweep(self, now: float) -> int:
        """Drop uploads idle for longer than ``orphan_after`` seconds; returns how many."""
        stale = [
            uid for uid, u in self._uploads.items() if now - u.last > self.orphan_after
        ]
        for uid in stale:
            del self._uploads[uid]
        return len(stale)

    def drop_channel(self, connection_id: str) -> int:
        """The channel closed: forget its uploads (unfinished ones are lost)."""
        gone = [uid for uid, u in self._uploads.items() if u.connection_id == connection_id]
        for uid in gone:
            del self._uploads[uid]
        return len(gone)

    def drop_runner(self) -> int:
        """The runner disconnected (or its epoch changed): forget every upload."""
        n = len(self._uploads)
        self._uploads.clear()
        return n


_PHASE_HANDLERS: dict[str, Callable[[ArtifactUploads, dict[str, Any], float], Reply]] = {
    "begin": ArtifactUploads._begin,
    "append": ArtifactUploads._append,
    "finish": ArtifactUploads._finish,
}
