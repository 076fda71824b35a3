"""PERM — permission intersection: the http allowlist, requireProfile, artifact roots, the RPC
allowlist, cleanup channels, active_list and stop methods after a revoke.

The control plane is registered with more profiles (``default``, ``research``) than the
runner's ``allowedProfiles`` (``default``) where a case needs the runner's own profile check:
the control plane then queues the command and only the runner can refuse it.
"""

from __future__ import annotations

import json
import os
from typing import Any

from conformance.marks import case
from conformance.verdict import expect
from conformance.witness import witness
from fixtures.hermes.script import Script

from ._helpers_channels import (
    WAIT,
    effects_of,
    new_session,
    outcome_text,
)
from ._helpers_outcomes import brief_outcome, effects_since, last_seq, submit_http
from ._helpers_wire import (
    TIMEOUT,
    body_bytes,
    describe,
    effects_after,
    event_posted,
    http,
    open_session,
    refused_with,
)

#: The runner may be stricter than the control plane about profiles (its own allowedProfiles).
NARROW = {"profiles": ("default", "research"), "config_extra": {"allowedProfiles": ["default"]}}


def _last_seq(world) -> int:
    entries = world.hermes.effects.entries
    return max(world.cp.history.last_seq, entries[-1].seq if entries else 0)


def _no_effect(world, since: int, what: str, *names: str | None) -> None:
    """No Hermes effect at all since ``since`` (an http refusal reaches nothing in Hermes)."""
    found = effects_after(world, since)
    expect(not found, expected=f"no Hermes effect for {what}",
           actual=[f"#{e.seq} {e.kind} {json.dumps(e.detail, default=str)[:80]}" for e in found],
           witness=witness(world, *names, after_seq=since, last=8))


@case("PERM-001")
async def test_get_status_is_relayed(world):
    """fails when: GET /api/status is refused, or its result is not {status, headers,
    body: base64 of Hermes' body} (e.g. the body relayed as text or JSON)."""
    handle, out = await http(world, "/api/status", profile=None)
    raw = body_bytes(out.result) if out.ok else None
    try:
        status_doc = json.loads(raw) if raw is not None else None
    except ValueError:
        status_doc = None
    ok = (out.ok and isinstance(out.result, dict) and out.result.get("status") == 200
          and isinstance(out.result.get("headers"), dict) and isinstance(status_doc, dict)
          and status_doc.get("version") == "0.19.0")
    expect(ok, expected="{status: 200, headers: {...}, body: base64 of Hermes' /api/status JSON}",
           actual=describe(out), witness=witness(world, handle.id, last=5))


@case("PERM-002")
async def test_non_get_http_is_forbidden(world):
    """fails when: the runner forwards a POST/PUT/DELETE to Hermes (an http.mutation effect) or
    refuses it with another code than runner_http_forbidden."""
    for method, path in (("POST", "/api/config"), ("PUT", "/api/profiles"),
                         ("DELETE", "/api/sessions/x")):
        since = _last_seq(world)
        handle, out = await http(world, path, method=method)
        expect(refused_with(out, ["runner_http_forbidden"]),
               expected=f"{method} {path} refused runner_http_forbidden", actual=describe(out),
               witness=witness(world, handle.id, last=5))
        _no_effect(world, since, f"{method} {path}", handle.id)


@case("PERM-003")
async def test_get_outside_the_allowlist_is_forbidden(world):
    """fails when: the runner relays a GET of a path outside the read-only allowlist
    (e.g. /api/sessions, /api/skills, /api/statusx, /api/status/../config)."""
    for path in ("/api/sessions", "/api/skills", "/api/statusx", "/api/config/schema",
                 "/api/status/../config", "/"):
        since = _last_seq(world)
        handle, out = await http(world, path)
        expect(refused_with(out, ["runner_http_forbidden"]),
               expected=f"GET {path} refused runner_http_forbidden", actual=describe(out),
               witness=witness(world, handle.id, last=5))
        _no_effect(world, since, f"GET {path}", handle.id)


@case("PERM-004", **NARROW)
async def test_profile_checked_path_outside_allowed_profiles(world):
    """fails when: a profile-checked path (/api/config, session messages, bridge capabilities,
    downloads) is relayed for a profile outside allowedProfiles."""
    target = world.artifact_root / "perm004.txt"
    target.write_text("p\n")
    for path, file in (("/api/config", None), ("/api/sessions/abc/messages", None),
                       ("/api/plugins/yaoyao-bot-bridge/capabilities", None),
                       ("/api/files/download", str(target))):
        since = _last_seq(world)
        handle, out = await http(world, path, profile="research", file=file)
        expect(refused_with(out, ["runner_profile_forbidden"]),
               expected=f"GET {path}?profile=research refused runner_profile_forbidden",
               actual=describe(out), witness=witness(world, handle.id, last=5))
        _no_effect(world, since, f"GET {path} for research", handle.id)


@case("PERM-005")
async def test_download_inside_a_root_returns_the_bytes(world):
    """fails when: a download of a file inside an artifactRoot is refused or its bytes differ."""
    content = b"perm-005 \x00\xff bytes\n"
    target = world.artifact_root / "sub" / "report.bin"
    target.parent.mkdir()
    target.write_bytes(content)
    handle, out = await http(world, "/api/files/download", file=str(target))
    got = body_bytes(out.result) if out.ok else None
    expect(got == content, expected=f"the file's {len(content)} bytes", actual=describe(out),
           witness=witness(world, handle.id, last=5))


async def _refused_download(world, path: str, what: str) -> None:
    since = _last_seq(world)
    handle, out = await http(world, "/api/files/download", file=path)
    expect(refused_with(out, ["runner_artifact_forbidden"]),
           expected=f"{what}: refused runner_artifact_forbidden", actual=describe(out),
           witness=witness(world, handle.id, last=5))
    reads = [e for e in effects_after(world, since, ["file.read"])]
    expect(not reads, expected=f"{what}: no file read by Hermes",
           actual=[e.detail for e in reads], witness=witness(world, handle.id, last=6))


def _outside(world):
    outside = world.artifact_root.parent / "outside"
    outside.mkdir(exist_ok=True)
    secret = outside / "secret.txt"
    secret.write_text("outside the roots\n")
    return secret


@case("PERM-006")
async def test_symlink_leaving_the_roots_is_refused(world):
    """fails when: the runner checks the path as given instead of its realpath, so a symlink
    inside the root pointing outside it is downloaded."""
    secret = _outside(world)
    link = world.artifact_root / "link.txt"
    link.symlink_to(secret)
    dirlink = world.artifact_root / "dirlink"
    dirlink.symlink_to(secret.parent, target_is_directory=True)
    await _refused_download(world, str(link), "a symlink to a file outside the roots")
    await _refused_download(world, str(dirlink / "secret.txt"),
                            "a file under a symlinked directory outside the roots")


@case("PERM-007")
async def test_dotdot_leaving_the_roots_is_refused(world):
    """fails when: the runner compares the unnormalised path with the root (a prefix check), so
    ``<root>/../outside/secret.txt`` (or a sibling ``<root>-x`` directory) is downloaded."""
    secret = _outside(world)
    await _refused_download(world, f"{world.artifact_root}/../outside/{secret.name}",
                            "a path with .. leaving the root")
    sibling = world.artifact_root.parent / (world.artifact_root.name + "-x")
    sibling.mkdir()
    (sibling / "f.txt").write_text("sibling\n")
    await _refused_download(world, str(sibling / "f.txt"), "a sibling directory sharing the prefix")


@case("PERM-008", config_extra={"artifactRoots": []})
async def test_no_roots_refuses_every_download(world):
    """fails when: with artifactRoots [] the runner allows some download (e.g. treats an empty
    list as "no restriction")."""
    target = world.artifact_root / "perm008.txt"
    target.write_text("x\n")
    await _refused_download(world, str(target), "a download with artifactRoots []")
    await _refused_download(world, "/etc/hostname", "/etc/hostname with artifactRoots []")


@case("PERM-009", hermes_script="plain")
async def test_rpc_outside_the_allowlist_is_forbidden(world):
    """fails when: a gateway.rpc method outside the allowlist (session.list, config.set,
    computer.invoke) is sent to Hermes or refused with another code than
    runner_command_forbidden."""
    ch, sid = await open_session(world)
    for method in ("session.list", "config.set", "session.history", "computer.invoke"):
        since = _last_seq(world)
        out = await world.cp.rpc(ch, method, {"session_id": sid, "profile": "default"},
                                 as_sent=True)  # outside the allowlist on purpose
        expect(refused_with(out, ["runner_command_forbidden"]),
               expected=f"{method} refused runner_command_forbidden", actual=describe(out))
        sent = [e for e in effects_after(world, since)
                if e.cause is not None and e.cause.method == method]
        expect(not sent, expected=f"nothing of {method} reaches Hermes",
               actual=[e.kind for e in sent], witness=witness(world, method, after_seq=since))


@case("PERM-010", hermes_script="plain", **NARROW)
async def test_session_create_outside_allowed_profiles(world):
    """fails when: session.create (or session.resume) for a profile outside allowedProfiles
    reaches Hermes (a session.created effect) instead of runner_profile_forbidden."""
    ch = await world.cp.open_channel(world.runner_id, profile="default")
    stored = world.hermes.add_stored_session(messages=[{"role": "user", "text": "hi"}],
                                             title="t", profile="research")
    for method, params in (("session.create", {"profile": "research", "cols": 100}),
                           ("session.resume", {"profile": "research", "session_id": stored})):
        since = _last_seq(world)
        out = await world.cp.rpc(ch, method, params)
        expect(refused_with(out, ["runner_profile_forbidden"]),
               expected=f"{method} for 'research' refused runner_profile_forbidden",
               actual=describe(out))
        made = effects_after(world, since, ["session.created", "session.resumed"])
        expect(not made, expected=f"no session made by {method}",
               actual=[e.kind for e in made], witness=witness(world, method, after_seq=since))


@case("PERM-011", hermes_script="plain")
async def test_cleanup_channel_allows_only_stop_methods(world):
    """fails when: a cleanup channel (cleanupOnly) forwards prompt.submit, or refuses
    session.resume / interrupt / active_list / close on it."""
    stored = world.hermes.add_stored_session(messages=[{"role": "user", "text": "old"}], title="c")
    ch = await world.cp.open_channel(world.runner_id, profile="default", cleanup_only=True)
    out = await world.cp.rpc(ch, "session.resume", {"profile": "default", "session_id": stored})
    expect(out.ok and isinstance(out.result, dict) and "session_id" in out.result,
           expected="session.resume allowed on a cleanup channel", actual=describe(out))
    sid = str(out.result["session_id"])
    since = _last_seq(world)
    out = await world.cp.rpc(ch, "prompt.submit", {"session_id": sid, "text": "no"})
    expect(refused_with(out, ["runner_cleanup_forbidden"]),
           expected="prompt.submit refused runner_cleanup_forbidden", actual=describe(out))
    prompts = effects_after(world, since, ["prompt.accepted"])
    expect(not prompts, expected="no prompt reaches Hermes", actual=[e.seq for e in prompts],
           witness=witness(world, sid, after_seq=since))
    for method, params in (("session.interrupt", {"session_id": sid}),
                           ("session.active_list", {"profile": "default",
                                                    "current_session_id": sid}),
                           ("session.close", {"session_id": sid})):
        out = await world.cp.rpc(ch, method, params)
        expect(out.ok, expected=f"{method} allowed on a cleanup channel", actual=describe(out),
               witness=witness(world, method, after_seq=since, last=6))


@case("PERM-012", hermes_script="plain")
async def test_active_list_is_exact_and_filtered(world):
    """fails when: session.active_list is forwarded with extra/missing params or for a session the
    channel does not own, or its result lists sessions other than current_session_id."""
    ch, sid = await open_session(world)
    out = await world.cp.rpc(ch, "session.create", {"profile": "default", "cols": 100})
    expect(out.ok, expected="a second session", actual=describe(out))
    other_ch, foreign = await open_session(world)
    del other_ch
    good = {"profile": "default", "current_session_id": sid}
    out = await world.cp.rpc(ch, "session.active_list", good)
    listed = out.result.get("sessions") if out.ok and isinstance(out.result, dict) else None
    ids = [s.get("id") for s in listed or [] if isinstance(s, dict)]
    expect(out.ok and ids in ([sid], []),
           expected=f"active_list holds only {sid}", actual=f"{describe(out)}",
           witness=witness(world, "session.active_list", last=5))
    for params in ({**good, "extra": 1}, {"current_session_id": sid},
                   {"profile": "default", "current_session_id": foreign},
                   {"profile": "default"}):
        since = _last_seq(world)
        out = await world.cp.rpc(ch, "session.active_list", params, as_sent=True)  # malformed on purpose
        expect(refused_with(out, ["runner_session_forbidden"]),
               expected=f"active_list {params} refused runner_session_forbidden",
               actual=describe(out))
        sent = [e for e in effects_after(world, since)
                if e.cause is not None and e.cause.method == "session.active_list"]
        expect(not sent, expected="the refused active_list never reaches Hermes",
               actual=[e.kind for e in sent])


@case("PERM-013")
async def test_unauthorized_http_and_artifact_paths(world):
    """fails when: an unauthorized HTTP operation (a mutation, a path off the allowlist) or an
    artifact path (relative, missing, outside the roots) is relayed instead of refused with
    runner_http_forbidden / runner_artifact_forbidden."""
    for method, path in (("PATCH", "/api/config"), ("GET", "/api/env")):
        since = _last_seq(world)
        handle, out = await http(world, path, method=method)
        expect(refused_with(out, ["runner_http_forbidden"]),
               expected=f"{method} {path} refused runner_http_forbidden", actual=describe(out),
               witness=witness(world, handle.id, last=4))
        _no_effect(world, since, f"{method} {path}", handle.id)
    secret = _outside(world)
    (world.artifact_root / "rel.txt").write_text("r\n")
    for path, what in (("rel.txt", "a relative path"),
                       (str(world.artifact_root / "missing.txt"), "a missing file"),
                       (str(secret), "a file outside the roots")):
        await _refused_download(world, path, what)


@case("PERM-014", hermes_script="plain", manual_clock=True)
async def test_only_stop_methods_after_revocation(world):
    """fails when: after the channel's task permission is revoked the runner still executes a
    prompt (admit said false), or refuses the stop methods interrupt / owned active_list."""
    ch, sid = await open_session(world)
    await event_posted(world, ch, sid, timeout=TIMEOUT)   # no event of the create may reach the revoked channel
    handle = await world.cp.submit_rpc(ch, "prompt.submit", {"session_id": sid, "text": "late"})
    world.cp.faults.delay_next("admit", seconds=0.25, target=handle.id)
    await world.cp.history.wait_for(
        lambda ex: ex.route == "admit" and ex.command_id == handle.id, timeout=TIMEOUT)
    await world.clock.wait_pending(world.clock.now() + 0.25, timeout=TIMEOUT)
    world.cp.revoke_channel(ch)
    world.clock.advance(0.25)
    out = await handle.wait(TIMEOUT)
    expect(refused_with(out, ["runner_command_not_admitted"]),
           expected="the prompt after the revoke: runner_command_not_admitted",
           actual=describe(out), witness=witness(world, handle.id, last=6))
    expect(not world.hermes.effects.of("prompt.accepted", session_id=sid),
           expected="no prompt reaches Hermes", actual=world.hermes.effects.kinds()[-6:])
    out = await world.cp.rpc(ch, "session.interrupt", {"session_id": sid})
    expect(out.ok and world.hermes.effects.count("session.interrupted", session_id=sid) == 1,
           expected="session.interrupt still executes on the revoked channel",
           actual=describe(out), witness=witness(world, sid, last=6))
    out = await world.cp.rpc(ch, "session.active_list",
                             {"profile": "default", "current_session_id": sid})
    expect(out.ok, expected="an owned session.active_list still executes", actual=describe(out),
           witness=witness(world, "session.active_list", last=4))


@case("PERM-901")
async def test_core_runner_refuses_a_computer_target(world: Any) -> None:
    """fails when: a core runner (no computers) ignores the `computer` target of an http
    command and relays the request to its local Hermes (a GET of /api/status, of session
    messages or a download with a computer target reaches Hermes or answers 200).

    The paths of rules 3 and 3b, and /api/status (allowlisted, no profile check): §3.1 says
    every request with a computer target is refused, whatever its code."""
    target = {"id": "vm-1"}
    for path, search in (("/api/files/download", "?profile=default&path=%2Ftmp%2Fx"),
                         ("/api/sessions/s1/messages", "?profile=default"),
                         ("/api/status", "")):
        since = last_seq(world)
        out = await submit_http(world, {"path": path, "method": "GET", "search": search,
                                  "computer": target})
        expect(not out.ok, expected=f"GET {path} with a computer target refused",
               actual=brief_outcome(out))
        expect(not effects_since(world, since),
               expected=f"no Hermes effect for GET {path} with a computer target",
               actual=effects_since(world, since))


@case("PERM-902")
async def test_download_reaches_hermes_as_its_realpath(world: Any) -> None:
    """A file inside the artifact root and a symlink to it (also inside): a download of the
    link reaches Hermes as the target's realpath, the path the runner checked.

    fails when: the runner checks the realpath but asks Hermes for the path it was given, so a
    symlink swapped between check and read escapes the roots."""
    root = world.artifact_root
    target = root / "perm902-target.txt"
    target.write_bytes(b"real\n")
    link = root / "perm902-link.txt"
    os.symlink(target, link)
    from urllib.parse import urlencode
    search = "?" + urlencode({"profile": "default", "path": str(link)})
    mark = world.hermes.effects.entries[-1].seq if world.hermes.effects.entries else 0
    out = await (await world.cp.submit(world.runner_id, "http", {
        "method": "GET", "path": "/api/files/download", "search": search})).wait(WAIT)
    expect(out.ok, expected="the download through an in-root symlink is relayed",
           actual=outcome_text(out))
    asked = [e.detail.get("path") for e in effects_of(world, "file.read", after_seq=mark)]
    real = str(target.resolve())
    expect(asked == [real], expected=f"Hermes asked for the realpath {real}", actual=asked)


@case("PERM-903", hermes_script=Script.bundled("slow", active_list_without_list=True))
async def test_active_list_without_a_list_is_unconfirmed(world: Any) -> None:
    """Hermes answers session.active_list with ``{}``: the runner must answer 502
    session_stop_unconfirmed — the control plane cannot tell whether the session still runs.

    fails when: the runner reads a missing list as an empty one ("nothing is running"), so a
    stop is confirmed that Hermes never confirmed."""
    cp = world.cp
    ch = await cp.open_channel(world.runner_id)
    sid = await new_session(world, ch)
    out = await cp.rpc(ch, "session.active_list", {"profile": "default",
                                                   "current_session_id": sid})
    expect(not out.ok and out.status == 502 and out.code == "session_stop_unconfirmed",
           expected="502 session_stop_unconfirmed for an active_list reply without a list",
           actual=outcome_text(out))
