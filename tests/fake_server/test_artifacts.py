"""Unit tests of the sans-IO artifact upload machine (protocol-reference §2.6 artifact, §5)."""
from __future__ import annotations

import base64
import hashlib
import uuid
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fake_server.artifacts import ArtifactUploads, PublishedArtifact, node_base64
from fake_server.timings import MIB, Limits

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


def test_happy_path_publishes_once_and_repeated_finish_returns_same_result() -> None:
    seen: list[PublishedArtifact] = []
    u = ArtifactUploads(on_publish=seen.append)
    data = b"hello world"
    assert begin(u, uid(1), data) == (200, {"ok": True, "next": 0})  # no result until finish
    assert append(u, uid(1), 0, data[:5]).body["next"] == 1
    assert append(u, uid(1), 1, data[5:]).body["next"] == 2
    first = finish(u, uid(1))
    want = {"name": "out.txt", "size": len(data), "digest": sha(data)}
    assert first == (200, {"ok": True, "next": 2, "result": want})
    assert finish(u, uid(1)) == first
    assert begin(u, uid(1), data) == first  # idempotent begin after finish
    assert len(u.published) == 1 and seen == u.published
    assert u.published[0].data == data and u.published[0].connection_id == CH
    assert u.unfinished_bytes == 0


def test_empty_file_needs_no_chunks() -> None:
    u = ArtifactUploads()
    begin(u, uid(1), b"")
    assert finish(u, uid(1)).body["result"]["size"] == 0
    assert u.published[0].data == b""


@pytest.mark.parametrize(
    "patch",
    [
        {"extra": 1},                       # strict keys
        {"connectionId": "not-a-uuid"},
        {"id": 5},
        {"phase": "abort"},
        {"name": ""},
        {"name": "x" * 241},
        {"name": "\U0001F600" * 121},      # 242 UTF-16 code units
        {"size": -1},
        {"size": 25 * MIB + 1},
        {"size": 1.5},
        {"size": True},
        {"size": "3"},
        {"digest": "A" * 64},
        {"digest": "0" * 63},
        {"index": -1},
        {"data": "A" * (MIB + 1)},         # the limit is on the base64 text
        {"data": "\U0001F600" * (MIB // 2) + "A"},  # counted in UTF-16 units
        {"data": 5},
        {"id": str(uuid.UUID(int=1))},     # version 0: not an RFC 9562 UUID
        {"connectionId": "00000000-0000-4000-c000-000000000001"},  # variant c
        {"id": "00000000-0000-9000-8000-000000000001"},            # version 9
        {"id": "FFFFFFFF-FFFF-FFFF-FFFF-FFFFFFFFFFFF"},            # max UUID is lower case only
        {"name": None},
    ],
)
def test_bad_shape_is_400_invalid_workspace_request(patch: dict[str, Any]) -> None:
    u = ArtifactUploads()
    body = {"connectionId": CH, "id": uid(1), "phase": "begin", "name": "a",
            "size": 1, "digest": sha(b"a")} | patch
    assert code(u.handle(body, channel_ok=True, now=0)) == (400, "invalid_workspace_request")


@pytest.mark.parametrize("body", [None, [], "x", 3, {}, {"connectionId": CH, "id": uid(1)}])
def test_non_objects_and_missing_required_are_400(body: object) -> None:
    assert code(ArtifactUploads().handle(body, channel_ok=True, now=0)) == (
        400, "invalid_workspace_request")


def test_data_is_limited_on_its_base64_text_not_on_the_decoded_bytes() -> None:
    u = ArtifactUploads()
    raw = bytes(range(256)) * 4096  # 1 MiB raw: 1,398,104 base64 characters
    begin(u, uid(1), raw)
    assert code(append(u, uid(1), 0, raw)) == (400, "invalid_workspace_request")
    part = raw[: 3 * MIB // 4]  # 786,432 bytes: exactly 1,048,576 characters
    assert len(b64(part)) == MIB
    assert append(u, uid(1), 0, part).body["next"] == 1


NODE_CASES = ["QUJD\nREVG", "QQ", "Q", "QUJ=D", "a b=c", "-_-_", "QU!JD", "QQ==QQ==", "Q===",
              "QUI", "=QQ", "QUJDRA=E", "", "  ", "QUJD\r\n", "\u00e9QUJD", "+/+/"]
#: Buffer.from(s, "base64").toString("hex") under Node 20, recorded (the test below re-checks
#: them against a live node when one is installed).
NODE_HEX = ["414243444546", "41", "", "4142", "69", "fbffbf", "414243", "41", "", "4142", "",
            "41424344", "", "", "414243", "414243", "fbffbf"]


def test_base64_is_decoded_as_node_buffer_from() -> None:
    assert [node_base64(s).hex() for s in NODE_CASES] == NODE_HEX
    data = bytes(range(200))
    for text in (base64.encodebytes(data).decode(), base64.urlsafe_b64encode(data).decode(),
                 b64(data).rstrip("=")):
        assert node_base64(text) == data


def test_base64_matches_a_live_node() -> None:
    import json
    import shutil
    import subprocess

    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed")
    script = "const a=JSON.parse(require('fs').readFileSync(0,'utf8'));" \
             "console.log(JSON.stringify(a.map(s=>Buffer.from(s,'base64').toString('hex'))))"
    out = subprocess.run([node, "-e", script], input=json.dumps(NODE_CASES), text=True,
                         capture_output=True, check=True, timeout=30).stdout
    assert json.loads(out) == NODE_HEX


def test_mime_and_url_safe_base64_chunks_are_accepted() -> None:
    u = ArtifactUploads()
    data = bytes(range(256)) * 3
    begin(u, uid(1), data)
    body = {"connectionId": CH, "id": uid(1), "phase": "append", "index": 0,
            "data": base64.encodebytes(data).decode()}
    assert u.handle(body, channel_ok=True, now=0).body["next"] == 1
    assert finish(u, uid(1)).ok and u.published[0].data == data


def test_nil_and_max_uuid_and_any_case_are_accepted_as_ids() -> None:
    u = ArtifactUploads()
    for n, upload in enumerate(("00000000-0000-0000-0000-000000000000",
                                "ffffffff-ffff-ffff-ffff-ffffffffffff",
                                "ABCDEF01-2345-6789-ABCD-EF0123456789")):
        assert begin(u, upload, b"x", ch=[CH, CH2, CH][n]).ok, upload


def test_limits_are_the_one_limits_table() -> None:
    u = ArtifactUploads(limits=Limits(artifacts_per_channel=2))
    assert begin(u, uid(1), b"x").ok and begin(u, uid(2), b"x").ok
    assert code(begin(u, uid(3), b"x")) == (429, "artifact_limit")
    assert ArtifactUploads().limits == Limits()


def test_integral_floats_are_integers_like_in_javascript() -> None:
    u = ArtifactUploads()
    assert begin(u, uid(1), b"ab", size=2.0).status == 200


def test_shape_is_checked_before_channel_and_channel_before_phase() -> None:
    u = ArtifactUploads()
    bad = {"connectionId": CH, "id": uid(1), "phase": "nope"}
    assert code(u.handle(bad, channel_ok=False, now=0)) == (400, "invalid_workspace_request")
    asked: list[str] = []

    def channel_ok(cid: str) -> bool:
        asked.append(cid)
        return False

    body = {"connectionId": CH, "id": uid(1), "phase": "begin"}
    assert code(u.handle(body, channel_ok=channel_ok, now=0)) == (403, "artifact_forbidden")
    assert asked == [CH]
    assert code(u.handle(body, channel_ok=True, now=0)) == (400, "artifact_invalid")


@pytest.mark.parametrize("missing", ["name", "size", "digest"])
def test_begin_missing_metadata_is_400_artifact_invalid(missing: str) -> None:
    u = ArtifactUploads()
    body = {"connectionId": CH, "id": uid(1), "phase": "begin", "name": "a", "size": 1,
            "digest": sha(b"a")}
    del body[missing]
    assert code(u.handle(body, channel_ok=True, now=0)) == (400, "artifact_invalid")


def test_reused_id_with_other_metadata_conflicts() -> None:
    u = ArtifactUploads()
    begin(u, uid(1), b"abc")
    assert begin(u, uid(1), b"abc").status == 200
    assert code(begin(u, uid(1), b"abd")) == (409, "idempotency_conflict")
    assert code(begin(u, uid(1), b"abc", name="other")) == (409, "idempotency_conflict")
    assert code(begin(u, uid(1), b"abc", ch=CH2)) == (409, "idempotency_conflict")


def test_nine_uploads_per_channel_hit_the_limit_but_another_channel_does_not() -> None:
    u = ArtifactUploads()
    for i in range(8):
        assert begin(u, uid(i), b"x").status == 200
    assert code(begin(u, uid(8), b"x")) == (429, "artifact_limit")
    assert begin(u, uid(9), b"x", ch=CH2).status == 200
    append(u, uid(0), 0, b"x")
    assert finish(u, uid(0)).ok  # a finished upload still counts, as upstream
    assert code(begin(u, uid(8), b"x")) == (429, "artifact_limit")
    u.drop_channel(CH)  # only the channel's end frees its slots
    assert begin(u, uid(8), b"x").status == 200


def test_nine_sequential_finished_uploads_on_one_channel_hit_the_limit() -> None:
    u = ArtifactUploads()
    for i in range(8):
        assert begin(u, uid(i), b"x").ok and append(u, uid(i), 0, b"x").ok
        assert finish(u, uid(i)).ok
    assert code(begin(u, uid(8), b"x")) == (429, "artifact_limit")


def test_unfinished_bytes_per_runner_limit() -> None:
    u = ArtifactUploads(limits=Limits(artifact_size=10, artifact_unfinished=25))
    body = {"connectionId": CH, "phase": "begin", "name": "a", "size": 10, "digest": "0" * 64}
    assert u.handle(body | {"id": uid(1)}, channel_ok=True, now=0).status == 200
    assert u.handle(body | {"id": uid(2), "connectionId": CH2}, channel_ok=True, now=0).ok
    assert code(u.handle(body | {"id": uid(3)}, channel_ok=True, now=0)) == (429, "artifact_limit")
    assert u.unfinished_bytes == 20


def test_default_limit_is_64_mib_unfinished() -> None:
    u = ArtifactUploads()
    for i in range(2):
        body = {"connectionId": CH, "id": uid(i), "phase": "begin", "name": "a",
                "size": 25 * MIB, "digest": "0" * 64}
        assert u.handle(body, channel_ok=True, now=0).ok
    body = {"connectionId": CH2, "id": uid(9), "phase": "begin", "name": "a",
            "size": 14 * MIB + 1, "digest": "0" * 64}
    assert code(u.handle(body, channel_ok=True, now=0)) == (429, "artifact_limit")
    assert u.handle(body | {"size": 14 * MIB}, channel_ok=True, now=0).ok


def test_append_and_finish_on_unknown_upload_are_404() -> None:
    u = ArtifactUploads()
    assert code(append(u, uid(1), 0, b"x")) == (404, "artifact_missing")
    assert code(finish(u, uid(1))) == (404, "artifact_missing")
    begin(u, uid(1), b"x")
    assert code(append(u, uid(1), 0, b"x", ch=CH2)) == (404, "artifact_missing")


def test_append_missing_fields_is_400_artifact_invalid() -> None:
    u = ArtifactUploads()
    begin(u, uid(1), b"x")
    body = {"connectionId": CH, "id": uid(1), "phase": "append", "index": 0}
    assert code(u.handle(body, channel_ok=True, now=0)) == (400, "artifact_invalid")


def test_resent_chunk_same_bytes_ok_different_bytes_conflict() -> None:
    u = ArtifactUploads()
    begin(u, uid(1), b"abcd")
    append(u, uid(1), 0, b"ab")
    assert append(u, uid(1), 0, b"ab").body == {"ok": True, "next": 1}
    assert code(append(u, uid(1), 0, b"ax")) == (409, "idempotency_conflict")
    append(u, uid(1), 1, b"cd")
    finish(u, uid(1))
    assert u.published[0].data == b"abcd"


def test_append_after_finish_is_400_artifact_invalid() -> None:
    u = ArtifactUploads()
    begin(u, uid(1), b"abcd")
    append(u, uid(1), 0, b"abcd")
    assert finish(u, uid(1)).ok
    for index, chunk in ((0, b"abcd"), (0, b"wxyz"), (1, b"")):  # a resend too, as upstream
        assert code(append(u, uid(1), index, chunk)) == (400, "artifact_invalid")
    assert len(u.published) == 1


def test_out_of_order_and_oversize_chunks_are_409_artifact_invalid() -> None:
    u = ArtifactUploads()
    begin(u, uid(1), b"abcd")
    assert code(append(u, uid(1), 1, b"ab")) == (409, "artifact_invalid")
    assert code(append(u, uid(1), 0, b"abcde")) == (409, "artifact_invalid")
    append(u, uid(1), 0, b"abcd")
    assert code(append(u, uid(1), 1, b"e")) == (409, "artifact_invalid")


def test_empty_chunk_in_order_is_stored() -> None:
    u = ArtifactUploads()
    begin(u, uid(1), b"")
    assert append(u, uid(1), 0, b"").body == {"ok": True, "next": 1}
    begin(u, uid(2), b"ab")
    assert append(u, uid(2), 0, b"").body["next"] == 1
    assert append(u, uid(2), 1, b"ab").body["next"] == 2
    assert finish(u, uid(1)).ok and finish(u, uid(2)).ok
    assert [p.data for p in u.published] == [b"", b"ab"]


def test_short_finish_is_409_incomplete_and_upload_survives() -> None:
    u = ArtifactUploads()
    begin(u, uid(1), b"abcd")
    assert code(finish(u, uid(1))) == (409, "artifact_incomplete")
    append(u, uid(1), 0, b"ab")
    assert code(finish(u, uid(1))) == (409, "artifact_incomplete")
    append(u, uid(1), 1, b"cd")
    assert finish(u, uid(1)).ok and not code(finish(u, uid(1)))[1]


def test_bad_digest_is_409_nothing_is_published_and_the_upload_is_kept() -> None:
    u = ArtifactUploads()
    begin(u, uid(1), b"abcd", digest=sha(b"wxyz"))
    append(u, uid(1), 0, b"abcd")
    assert code(finish(u, uid(1))) == (409, "artifact_digest_mismatch")
    assert u.published == [] and u.unfinished_bytes == 4
    assert code(finish(u, uid(1))) == (409, "artifact_digest_mismatch")  # upstream keeps it


def test_sweep_drops_idle_uploads_only() -> None:
    u = ArtifactUploads(orphan_after=10.0)
    begin(u, uid(1), b"ab")
    begin(u, uid(2), b"ab")
    append(u, uid(2), 0, b"a", now=8.0)
    assert u.sweep(10.0) == 0
    assert u.sweep(10.5) == 1
    assert u.active() == [uid(2)]
    assert code(append(u, uid(1), 0, b"a")) == (404, "artifact_missing")


def test_drop_channel_and_drop_runner() -> None:
    u = ArtifactUploads()
    begin(u, uid(1), b"a")
    begin(u, uid(2), b"a", ch=CH2)
    assert u.drop_channel(CH) == 1
    assert u.active() == [uid(2)] and u.active(CH) == []
    assert code(finish(u, uid(1))) == (404, "artifact_missing")
    assert u.drop_runner() == 1 and u.active() == [] and u.unfinished_bytes == 0


def test_never_raises_on_garbage_ids_in_valid_shape() -> None:
    u = ArtifactUploads()
    body = {"connectionId": CH, "id": uid(1), "phase": "finish", "name": "x"}
    assert code(u.handle(body, channel_ok=True, now=0)) == (404, "artifact_missing")


@given(
    data=st.binary(min_size=0, max_size=300),
    cuts=st.lists(st.integers(min_value=1, max_value=300), max_size=12),
    resend=st.lists(st.integers(min_value=0, max_value=20), max_size=6),
)
def test_any_chunking_with_resends_publishes_the_exact_bytes_once(
    data: bytes, cuts: list[int], resend: list[int]
) -> None:
    u = ArtifactUploads(limits=Limits(artifact_chunk=88))  # 88 base64 characters: 64 bytes
    chunks: list[bytes] = []
    rest = data
    for c in cuts + [64] * 10:
        if not rest:
            break
        chunks.append(rest[: min(c, 64)])
        rest = rest[min(c, 64):]
    assert not rest
    assert begin(u, uid(1), data).ok
    for i, chunk in enumerate(chunks):
        assert append(u, uid(1), i, chunk).body["next"] == i + 1
        for r in resend:
            if r <= i:
                assert append(u, uid(1), r, chunks[r]).body["next"] == i + 1
    first = finish(u, uid(1))
    assert first.ok and finish(u, uid(1)) == first
    assert [p.data for p in u.published] == [data]


# -- stateful: the machine against a plain model --------------------------------------------
from hypothesis.stateful import (  # noqa: E402
    Bundle,
    RuleBasedStateMachine,
    consumes,
    invariant,
    rule,
)


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
