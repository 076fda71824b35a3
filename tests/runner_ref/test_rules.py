"""Allowlists, artifactRoots containment, fingerprints, the http plan and the state-dir lock."""
from __future__ import annotations

import hashlib
import json
import os
import stat
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from runner_ref import allowlists as A
from runner_ref.errors import CommandError
from runner_ref.fingerprint import command_fingerprint, js_stringify
from runner_ref.hermes import token_from_page
from runner_ref.http_plan import plan_http
from runner_ref.paths import contained_path
from runner_ref.statedir import LockedError, StateDir, state_dir_for

PROFILES = ("default", "work")


def code_of(fn, *args) -> str:  # type: ignore[no-untyped-def]
    with pytest.raises(CommandError) as info:
        fn(*args)
    return info.value.code


# ---- allowlists ---------------------------------------------------------------------------
@pytest.mark.parametrize("path", ["/api/status", "/api/profiles", "/api/config",
                                  "/api/sessions/abc_1/messages",
                                  "/api/plugins/yaoyao-bot-bridge/capabilities",
                                  "/api/files/download"])
def test_http_allowlist_get_only(path: str) -> None:
    A.http_route("GET", path)
    assert code_of(A.http_route, "POST", path) == "runner_http_forbidden"


@pytest.mark.parametrize("path", ["/api/sessions", "/api/status/", "/api/config?x", "/api/skills",
                                  "/api/sessions/a/b/messages", "/api/../api/status", "", None])
def test_http_allowlist_refuses_others(path: object) -> None:
    assert code_of(A.http_route, "GET", path) == "runner_http_forbidden"


def test_rpc_allowlist_and_cleanup() -> None:
    for m in A.RPC_METHODS:
        A.check_rpc_method(m, False)
    for bad in ("session.list", "session.history", "computer.invoke", "shell.exec", None):
        assert code_of(A.check_rpc_method, bad, False) == "runner_command_forbidden"
    for m in A.CLEANUP_METHODS:
        A.check_rpc_method(m, True)
    for m in ("prompt.submit", "session.create", "approval.respond"):
        assert code_of(A.check_rpc_method, m, True) == "runner_cleanup_forbidden"
    assert code_of(A.check_rpc_method, "session.list", True) == "runner_command_forbidden"


def test_require_profile() -> None:
    assert A.require_profile(None, PROFILES) == "default"
    assert A.require_profile(" work ", PROFILES) == "work"
    for bad in ("other", 5, ""):
        assert code_of(A.require_profile, bad, PROFILES) == "runner_profile_forbidden"
    assert code_of(A.require_profile, None, ("work",)) == "runner_profile_forbidden"


# ---- artifactRoots --------------------------------------------------------------------------
@pytest.fixture()
def tree(tmp_path: Path) -> dict[str, Path]:
    root = tmp_path / "root"
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "a.txt").write_text("a")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("s")
    sibling = tmp_path / "rootx"
    sibling.mkdir()
    (sibling / "b.txt").write_text("b")
    (root / "link-out").symlink_to(outside / "secret.txt")
    (root / "dirlink").symlink_to(outside)
    (root / "link-in").symlink_to(root / "sub" / "a.txt")
    return {"root": root, "outside": outside, "sibling": sibling, "tmp": tmp_path}


def test_contained_inside(tree: dict[str, Path]) -> None:
    roots = (str(tree["root"]),)
    assert contained_path(str(tree["root"] / "sub" / "a.txt"), roots) == os.path.realpath(
        tree["root"] / "sub" / "a.txt")
    assert contained_path(str(tree["root"] / "link-in"), roots).endswith("a.txt")


def test_root_itself_a_symlink(tree: dict[str, Path]) -> None:
    link_root = tree["tmp"] / "rootlink"
    link_root.symlink_to(tree["root"])
    assert contained_path(str(tree["root"] / "sub" / "a.txt"), (str(link_root),))


@pytest.mark.parametrize("make", [
    lambda t: str(t["root"] / "link-out"),                 # symlink out
    lambda t: str(t["root"] / "dirlink" / "secret.txt"),    # through a dir symlink
    lambda t: str(t["root"] / "sub" / ".." / "sub" / "a.txt"),  # any .. component
    lambda t: str(t["root"] / ".." / "outside" / "secret.txt"),
    lambda t: str(t["outside"] / "secret.txt"),             # absolute, outside
    lambda t: str(t["sibling"] / "b.txt"),                  # string-prefix sibling
    lambda t: "sub/a.txt",                                  # relative
    lambda t: str(t["root"]),                               # the root dir itself
    lambda t: str(t["root"] / "sub"),                       # a directory
    lambda t: str(t["root"] / "missing.txt"),
    lambda t: str(t["root"] / "sub" / "a.txt") + "\x00",
    lambda t: str(t["root"] / "sub" / "a\n.txt"),
    lambda t: "", lambda t: None, lambda t: 42, lambda t: "/" + "a" * 5000,
    lambda t: "//" + str(t["root"] / "sub" / "a.txt"),
])
def test_contained_refusals(tree: dict[str, Path], make) -> None:  # type: ignore[no-untyped-def]
    assert code_of(contained_path, make(tree), (str(tree["root"]),)) == "runner_artifact_forbidden"


def test_empty_roots_refuse_everything(tree: dict[str, Path]) -> None:
    assert code_of(contained_path, str(tree["root"] / "sub" / "a.txt"), ()) == \
        "runner_artifact_forbidden"


# ---- http plan ---------------------------------------------------------------------------
def test_http_plan(tree: dict[str, Path]) -> None:
    roots = (str(tree["root"]),)
    assert plan_http({"path": "/api/status", "method": "GET"}, ("x",), ()) == ("/api/status", {})
    assert plan_http({"path": "/api/config", "method": "GET", "search": "?profile=work"},
                     PROFILES, ())[1] == {"profile": "work"}
    f = str(tree["root"] / "sub" / "a.txt")
    assert plan_http({"path": "/api/files/download", "method": "GET",
                      "search": f"profile=default&path={f}"}, PROFILES, roots)[1]["path"] == \
        os.path.realpath(f)


@pytest.mark.parametrize("payload,code", [
    ({"path": "/api/plugins/yaoyao-bot-bridge/memory-extract", "method": "POST"},
     "memory_extraction_unavailable"),
    ({"path": "/api/computer/capabilities", "method": "GET", "search": "profile=nope"},
     "runner_profile_forbidden"),
    ({"path": "/api/computer/capabilities", "method": "GET"}, "computer_unavailable"),
    ({"path": "/api/files/download", "method": "GET", "computer": {}},
     "computer_artifact_required"),
    ({"path": "/api/sessions/s1/messages", "method": "GET", "computer": {}},
     "computer_unavailable"),
    ({"path": "/api/status", "method": "GET", "computer": {}}, "computer_unavailable"),
    ({"path": "/api/config", "method": "GET", "search": "profile=nope"},
     "runner_profile_forbidden"),
    ({"path": "/api/sessions", "method": "POST"}, "runner_http_forbidden"),
    ({"path": "/api/files/download", "method": "GET", "search": "path=/etc/passwd"},
     "runner_artifact_forbidden"),
])
def test_http_plan_refusals(payload: dict[str, object], code: str) -> None:
    with pytest.raises(CommandError) as info:
        plan_http(payload, PROFILES, ())
    assert info.value.code == code


# ---- fingerprints ------------------------------------------------------------------------
def test_fingerprint_is_sha256_of_js_stringify() -> None:
    cmd = {"id": "c1", "kind": "http", "payload": {"path": "/api/status", "n": 1.0, "u": "é\n"},
           "expiresAt": 1795992872977}
    text = '{"id":"c1","kind":"http","payload":{"path":"/api/status","n":1,"u":"é\\n"},' \
           '"expiresAt":1795992872977}'
    assert js_stringify(cmd) == text
    assert command_fingerprint(cmd) == hashlib.sha256(text.encode()).hexdigest()


def test_fingerprint_key_order_matters_as_received() -> None:
    a = json.loads('{"id":"c","kind":"k","payload":{"a":1,"b":2},"expiresAt":1}')
    b = json.loads('{"id":"c","kind":"k","payload":{"b":2,"a":1},"expiresAt":1}')
    assert command_fingerprint(a) != command_fingerprint(b)


@pytest.mark.parametrize("value,text", [
    (1e21, "1e+21"), (1e20, "100000000000000000000"), (1.5e-7, "1.5e-7"), (1e-6, "0.000001"),
    (-0.0, "0"), (0.1, "0.1"), ("\u2028\x7f", '"\u2028\x7f"'), ("\x1f", '"\\u001f"'),
    (float("nan"), "null"), ([None, True, False], "[null,true,false]"),
])
def test_js_number_and_string_forms(value: object, text: str) -> None:
    assert js_stringify(value) == text


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=20),
    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=5), kids, max_size=4),
    max_leaves=20)


@given(json_values)
def test_js_stringify_round_trips_through_json(value: object) -> None:
    assert json.loads(js_stringify(value)) == value


# ---- Hermes index page token -------------------------------------------------------------
def test_token_from_page() -> None:
    tok = "A" * 10 + "b_-" * 5
    page = f'<html><script>window.__HERMES_SESSION_TOKEN__="{tok}";</script>'
    assert token_from_page(page) == tok
    assert token_from_page('window.__HERMES_SESSION_TOKEN__="short"') is None
    assert token_from_page('window.__HERMES_SESSION_TOKEN__="' + "a" * 30 + '<x"') is None
    assert token_from_page("<html></html>") is None


# ---- state dir and lock --------------------------------------------------------------------
def test_state_dir_and_lock(tmp_path: Path) -> None:
    cfg = tmp_path / "runner.json"
    d = state_dir_for(str(cfg), "rid")
    assert d == str(tmp_path / "state" / "rid")
    first = StateDir(d, "i1")
    first.acquire()
    assert stat.S_IMODE(os.stat(d).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(os.path.join(d, "service-instance.sqlite3")).st_mode) == 0o600
    info = json.loads(Path(d, "service-instance.json").read_text())
    assert info["instanceId"] == "i1" and info["pid"] == os.getpid() and "token" not in info
    second = StateDir(d, "i2")
    with pytest.raises(LockedError, match="already used by another Yaoyao service"):
        second.acquire()
    first.release()
    assert not Path(d, "service-instance.json").exists()
    second.acquire()
    second.release()


@given(st.text())
def test_js_strings_match_json_escaping(s: str) -> None:
    # ECMAScript and Python escape the same set (", \\, C0 controls) when no surrogate is lone
    assert js_stringify(s) == json.dumps(s, ensure_ascii=False)


@given(st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF), st.text(max_size=5))
def test_js_lone_surrogates_are_escaped(lone: str, rest: str) -> None:
    # after json.loads a surrogate code point is always lone (escaped pairs are combined)
    assert js_stringify(lone + rest) == f'"\\u{ord(lone):04x}' + json.dumps(rest, ensure_ascii=False)[1:]
