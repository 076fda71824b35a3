"""Artifact uploads in any order against a plain model (Hypothesis stateful, sans-IO), and over
the wire: the audit's probe of the one high-severity artifact divergence."""
from __future__ import annotations

import base64
import uuid
from typing import Any

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, consumes, invariant, rule

from fake_server.artifacts import ArtifactUploads
from fake_server.timings import MIB, Limits

from .artifact_calls import CH, CH2, append, b64, begin, code, finish, sha, uid


class UploadStory(RuleBasedStateMachine):
    """Begin, append, resend, conflict, finish, drop, sweep — in any order.

    Promises: a file is published at most once and with exactly the declared bytes; the
    server's unfinished-byte count matches the model; every answer has the expected code."""

    uploads = Bundle("uploads")

    def __init__(self) -> None:
        super().__init__()
        self.u = ArtifactUploads(limits=Limits(artifact_chunk=24), orphan_after=10.0)
        self.now = 0.0
        self.n = 0
        # model: id → dict(ch, data, chunks, next, done, last)
        self.model: dict[str, dict[str, Any]] = {}

    @rule(target=uploads, data=st.binary(max_size=60), ch=st.sampled_from([CH, CH2]),
          size=st.integers(1, 16))
    def begin_upload(self, data: bytes, ch: str, size: int) -> str:
        self.n += 1
        upload = uid(self.n)
        chunks = [data[i:i + size] for i in range(0, len(data), size)]
        reply = begin(self.u, upload, data, ch=ch, now=self.now)
        on_ch = sum(1 for m in self.model.values() if m["ch"] == ch)  # finished ones too
        if on_ch >= 8:
            assert code(reply) == (429, "artifact_limit")
            return upload
        assert reply.body == {"ok": True, "next": 0}
        self.model[upload] = {"ch": ch, "data": data, "chunks": chunks, "next": 0,
                              "done": False, "last": self.now}
        return upload

    @rule(upload=uploads)
    def append_next(self, upload: str) -> None:
        m = self.model.get(upload)
        if m is None or m["next"] >= len(m["chunks"]):
            return
        reply = append(self.u, upload, m["next"], m["chunks"][m["next"]], ch=m["ch"],
                       now=self.now)
        m["next"] += 1
        m["last"] = self.now
        assert reply.body["next"] == m["next"]

    @rule(upload=uploads, which=st.integers(0, 10))
    def resend_or_conflict(self, upload: str, which: int) -> None:
        m = self.model.get(upload)
        if m is None or m["next"] == 0:
            return
        i = which % m["next"]
        chunk = m["chunks"][i]
        other = bytes([chunk[0] ^ 1]) + chunk[1:]
        if m["done"]:  # after finish every append is refused, a resend too
            for c in (chunk, other):
                assert code(append(self.u, upload, i, c, ch=m["ch"])) == (400, "artifact_invalid")
            return
        assert append(self.u, upload, i, chunk, ch=m["ch"], now=self.now).ok
        m["last"] = self.now
        assert code(append(self.u, upload, i, other, ch=m["ch"], now=self.now)) == (
            409, "idempotency_conflict")

    @rule(upload=uploads)
    def skip_ahead(self, upload: str) -> None:
        m = self.model.get(upload)
        if m is None:
            assert code(append(self.u, upload, 0, b"x")) in {(404, "artifact_missing")}
            return
        reply = append(self.u, upload, m["next"] + 1, b"x", ch=m["ch"], now=self.now)
        if m["done"]:
            assert code(reply) == (400, "artifact_invalid")
            return
        m["last"] = self.now
        assert code(reply) == (409, "artifact_invalid")

    @rule(upload=uploads)
    def finish_upload(self, upload: str) -> None:
        m = self.model.get(upload)
        reply = finish(self.u, upload, ch=m["ch"] if m else CH, now=self.now)
        if m is None:
            assert code(reply) == (404, "artifact_missing")
            return
        m["last"] = self.now
        if m["next"] < len(m["chunks"]):
            assert code(reply) == (409, "artifact_incomplete")
            return
        m["done"] = True
        assert reply.body["result"] == {"name": "out.txt", "size": len(m["data"]),
                                        "digest": sha(m["data"])}

    @rule(ch=st.sampled_from([CH, CH2]))
    def close_channel(self, ch: str) -> None:
        gone = [k for k, m in self.model.items() if m["ch"] == ch]
        assert self.u.drop_channel(ch) == len(gone)
        for k in gone:
            del self.model[k]

    @rule(dt=st.sampled_from([1.0, 6.0, 11.0]))
    def time_passes_and_watchdog_sweeps(self, dt: float) -> None:
        self.now += dt
        stale = [k for k, m in self.model.items() if self.now - m["last"] > 10.0]
        assert self.u.sweep(self.now) == len(stale)
        for k in stale:
            del self.model[k]

    @rule(upload=consumes(uploads))
    def forget(self, upload: str) -> None:
        """Keep the bundle small (the upload itself stays on the server)."""

    @invariant()
    def published_once_with_exact_bytes(self) -> None:
        ids = [p.upload_id for p in self.u.published]
        assert len(ids) == len(set(ids))
        for p in self.u.published:
            m = self.model.get(p.upload_id)
            if m is not None:
                assert p.data == m["data"] and m["done"]

    @invariant()
    def unfinished_bytes_match(self) -> None:
        assert self.u.unfinished_bytes == sum(
            len(m["data"]) for m in self.model.values() if not m["done"])


TestUploadStory = UploadStory.TestCase
TestUploadStory.settings = settings(stateful_step_count=30)


# -- over the wire: the audit's probe of the one high-severity artifact divergence ---------------


async def test_wire_data_limit_is_on_the_base64_text(cp: Any, client: Any, reg: Any) -> None:
    from .fake_server_client import AutoRunner

    raw = bytes(range(256)) * 4096  # 1 MiB raw: upstream answers 400
    async with AutoRunner(client):
        ch = await cp.open_channel(reg.runner_id)
        base = {"connectionId": ch.connection_id, "id": str(uuid.uuid4())}
        begun = await client.post("artifact", {**base, "phase": "begin", "name": "a.bin",
                                               "size": len(raw), "digest": sha(raw)})
        assert begun == (200, {"ok": True, "next": 0})
        status, body = await client.post("artifact", {**base, "phase": "append", "index": 0,
                                                      "data": b64(raw)})
        assert (status, body["code"]) == (400, "invalid_workspace_request")
        half = 3 * MIB // 4  # 786,432 bytes = 1,048,576 characters: the largest chunk
        for index, part in enumerate((raw[:half], raw[half:])):
            status, body = await client.post("artifact", {
                **base, "phase": "append", "index": index,
                "data": base64.encodebytes(part).decode() if index else b64(part)})
            assert status == 200 and body["next"] == index + 1, body
        assert (await client.post("artifact", {**base, "phase": "finish"}))[0] == 200
        assert [a.data for _, a in cp.artifacts] == [raw]
