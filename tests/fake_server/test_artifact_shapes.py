"""Artifact upload bodies (protocol-reference §2.6 artifact, §5): the strict shape, base64 as
Node decodes it, ids, the limits table, and the order of the checks (sans-IO)."""
from __future__ import annotations

import base64
import uuid
from typing import Any

import pytest

from fake_server.artifacts import ArtifactUploads, node_base64
from fake_server.timings import MIB, Limits

from .artifact_calls import CH, CH2, append, b64, begin, code, finish, sha, uid


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
