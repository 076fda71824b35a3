"""Differential: UUID, profile-name, tool/call-id and path rules written in both packages.

What each comparison found (and what was done):
- UUIDs. leaseId: ``fake_server.gates.UUID_RE`` (the ``tool`` route) and
  ``runner_ref.timings.UUID_RE`` (``lease.create``) agree on every input. runnerId and instance
  id differ *on purpose*, pinned below: the server's gates use upstream's loose middleware
  pattern ``^[0-9a-f-]{36}$`` (lower case, any dash layout); the runner's config wants a
  canonical 8-4-4-4-12 UUID in either case. Every id either side mints (lower-case uuid4)
  passes both. ``ZOD_UUID_RE`` (artifact ids) is stricter than both (RFC 9562 version/variant).
- Profile names: runner config (``allowedProfiles``: trimmed 1-256) and the admin validator
  (1-100 untrimmed, then trimmed non-blank) agree on the bad-character rule; the lengths differ
  on purpose (upstream's two schemas), pinned below. Both trimmed with Python's ``str.strip``,
  which is not JavaScript's ``trim`` (node disagreed on U+001C-U+001F, U+0085 and U+FEFF): a
  profile ``"work\\x1f"`` was accepted as ``"work"`` where upstream refuses it. Both now trim
  with the JavaScript set (``runner_ref/js_text.py``, ``fake_server/admin_schemas.py``), and
  lengths count UTF-16 units as zod does.
- toolId/callId lengths: the runner's listener counted code points, the hub UTF-16 units (as
  JavaScript); node agrees with the hub, so the runner now counts UTF-16 units too.
- Paths: only the runner has a path rule (``artifactRoots`` containment, ``runner_ref/paths.py``);
  the control plane never sees a file path, so there is nothing to compare (skipped, with reason).
"""

from __future__ import annotations

import uuid

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from fake_server import admin_schemas, gates
from fake_server.artifacts import ZOD_UUID_RE
from fake_server.tool_calls import js_length as server_js_length
from fake_server.tool_calls import parse_tool_body
from runner_ref import config as runner_config
from runner_ref.js_text import js_length, js_trim
from runner_ref.teamtools.call_rules import parse_call
from runner_ref.timings import UUID_RE as RUNNER_UUID_RE

from .node import Node

HEX = "0123456789abcdefABCDEF"
uuidish = st.one_of(
    st.uuids().map(str),
    st.uuids().map(lambda u: str(u).upper()),
    st.text(st.sampled_from(HEX + "-g "), min_size=34, max_size=38),
    st.uuids().map(lambda u: str(u).replace("-", "")[:4] + "-" + str(u).replace("-", "")[4:]
                   + "---"),
)


def _loose(s: str) -> bool:
    return bool(gates.INSTANCE_RE.match(s))


def _canonical_any_case(s: str) -> bool:
    return bool(RUNNER_UUID_RE.match(s))


@given(s=uuidish)
def test_lease_ids_agree(s: str) -> None:
    assert bool(gates.UUID_RE.match(s)) == bool(RUNNER_UUID_RE.match(s)), s


@given(s=uuidish)
@example(s="ABCDEF00-0000-4000-8000-000000000000")
@example(s="0123456789abcdef0123456789abcdef----")
def test_runner_and_instance_ids_differ_only_as_pinned(s: str) -> None:
    assert gates.RUNNER_ID_RE.pattern == gates.INSTANCE_RE.pattern
    loose, canonical = _loose(s), _canonical_any_case(s)
    if canonical and not loose:      # pinned: the config takes upper case, the gate does not
        assert s != s.lower(), s
    if loose and not canonical:      # pinned: the gate takes any dash layout, the config not
        assert s == s.lower() and not RUNNER_UUID_RE.match(s), s


def test_the_pinned_differences() -> None:
    upper = str(uuid.uuid4()).upper()
    assert _canonical_any_case(upper) and not _loose(upper)
    odd = "0123456789abcdef0123456789abcdef----"
    assert _loose(odd) and not _canonical_any_case(odd)


@given(u=st.uuids())
def test_every_minted_id_passes_both(u: uuid.UUID) -> None:
    s = str(u)
    assert _loose(s) and _canonical_any_case(s) and gates.UUID_RE.match(s)


@given(s=uuidish)
def test_zod_uuid_is_stricter_than_both(s: str) -> None:
    if ZOD_UUID_RE.match(s):
        assert _canonical_any_case(s), s


# --- profile names -----------------------------------------------------------------------------

def _admin_ok(names: list[str]) -> bool:
    try:
        admin_schemas.REGISTRATION_SCHEMA["allowedProfiles"][1](names)
    except admin_schemas.AdminError:
        return False
    return True


def _runner_ok(names: list[str]) -> bool:
    return runner_config._profiles_ok(names)


profile_chars = st.one_of(st.sampled_from(list("ab/\\ \t\x00\x1f\x1c\x85\ufeff\u3000\u2028")),
                          st.characters())
names = st.text(profile_chars, max_size=6)


@given(name=names)
@example(name="work\x1f")
@example(name="\ufeffwork")
@example(name="\x85")
def test_short_profile_names_agree(name: str) -> None:
    # under 100 UTF-16 units, where both schemas take the same lengths
    assert _admin_ok([name]) == _runner_ok([name]), repr(name)


def test_profile_lengths_differ_as_pinned() -> None:
    long = "p" * 101
    assert _runner_ok([long]) and not _admin_ok([long])   # config 1-256, registration 1-100
    assert not _runner_ok(["p" * 257])
    astral = "\U0001f600" * 51                               # 102 UTF-16 units, 51 code points
    assert not _admin_ok([astral])


def test_trim_is_javascripts(node: Node) -> None:
    for cp in [*range(0, 0x3001), 0xFEFF, 0x180E, 0x200B]:
        s = chr(cp) + "x" + chr(cp)
        assert js_trim(s) == node.trim(s), hex(cp)


def test_both_trims_agree() -> None:
    assert admin_schemas._JS_WHITESPACE == runner_config.js_trim.__globals__["JS_WHITESPACE"]


# --- toolId / callId ---------------------------------------------------------------------------

def _hub_ok(tool_id: str, call_id: str) -> bool:
    body = {"leaseId": str(uuid.uuid4()), "toolId": tool_id, "callId": call_id, "arguments": {}}
    return parse_tool_body(body).__class__.__name__ == "ToolRequest"


def _listener_ok(tool_id: str, call_id: str) -> bool:
    return parse_call({"toolId": tool_id, "callId": call_id, "arguments": {}}).__class__.__name__ \
        == "Call"


@given(tool=st.text(max_size=110), call=st.text(max_size=210))
@example(tool="\U0001f600" * 51, call="c")
@example(tool="t", call="\U0001f600" * 100)
@example(tool="t" * 100, call="c" * 200)
@example(tool="t" * 101, call="c")
def test_tool_and_call_id_lengths_agree(tool: str, call: str) -> None:
    assert _hub_ok(tool, call) == _listener_ok(tool, call), (len(tool), len(call))


def test_lengths_are_javascripts(node: Node) -> None:
    for s in ["", "a", "é", "\U0001f600", "a\U0001f600b", "\ud800"]:
        assert js_length(s) == server_js_length(s) == node.length(s), repr(s)


def test_paths_have_one_side_only() -> None:
    pytest.skip("the control plane has no path rule: artifactRoots containment is the runner's "
                "alone (runner_ref/paths.py), tested in tests/runner_ref")
