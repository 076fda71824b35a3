"""The phases of one artifact upload (protocol-reference §2.6 artifact, §5): begin, append,
finish, their conflicts and limits, the sweep and the drops (sans-IO)."""
from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from fake_server.artifacts import ArtifactUploads, PublishedArtifact
from fake_server.timings import MIB, Limits

from .artifact_calls import CH, CH2, append, begin, code, finish, sha, uid


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
