"""The end-to-end demonstration: a runner, driven as a black box, through the whole path.

``python -m conformance demo [--runner-cmd "CMD --config {config}"] [--out DIR]``

It starts the simulated control plane and the scripted Hermes in process, registers a runner
through the admin API (login, CSRF, exact Origin) exactly as an administrator would, writes the
downloaded ``runner.json`` (mode 0600) into a fresh directory, starts the runner command in its own
process group and then drives commands through it. Each step is checked against what reached the
control plane (its history) and what reached Hermes (its effect log). It prints one line per
step, a summary, and writes ``report.json`` and the runner's output to ``--out``.

This module treats the runner as a black box: it never imports ``runner_ref``.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import hashlib
import json
import os
import shlex
import signal
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from fake_server import ControlPlane, Timings
from fixtures.hermes import ScriptedHermes

DEFAULT_RUNNER_CMD = f"{shlex.quote(sys.executable)} -m runner_ref --config {{config}}"


@dataclass
class Step:
    name: str
    requirement: str
    status: str = "pending"  # pass | fail
    detail: str = ""
    seconds: float = 0.0


@dataclass
class DemoReport:
    runner_cmd: str
    server_url: str = ""
    hermes_url: str = ""
    steps: list[Step] = field(default_factory=list)
    exit_code: int | None = None
    secrets_leaked: list[str] = field(default_factory=list)

    @property
    def passed(self) -> int:
        return sum(1 for s in self.steps if s.status == "pass")

    @property
    def ok(self) -> bool:
        return all(s.status == "pass" for s in self.steps) and not self.secrets_leaked


class StepFailed(AssertionError):
    pass


def expect(cond: bool, message: str) -> None:
    if not cond:
        raise StepFailed(message)


class RunnerProcess:
    """The runner under test: a command line, a config file, a state directory, signals."""

    def __init__(self, cmd_template: str, config_path: Path, out_dir: Path) -> None:
        self.argv = shlex.split(cmd_template.replace("{config}", shlex.quote(str(config_path))))
        self.stdout_path = out_dir / "runner.stdout"
        self.stderr_path = out_dir / "runner.stderr"
        self.proc: asyncio.subprocess.Process | None = None

    async def start(self) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("FAKE_SERVER", "HERMES_"))}
        # the child keeps its own copies of the descriptors; ours close once it is spawned
        with open(self.stdout_path, "wb") as out, open(self.stderr_path, "wb") as err:  # noqa: ASYNC230
            self.proc = await asyncio.create_subprocess_exec(
                *self.argv, stdout=out, stderr=err, stdin=asyncio.subprocess.DEVNULL,
                env=env, start_new_session=True)

    def signal(self, sig: int) -> None:
        if self.proc is not None and self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, sig)

    async def wait(self, timeout: float) -> int | None:
        assert self.proc is not None
        try:
            return await asyncio.wait_for(self.proc.wait(), timeout)
        except TimeoutError:
            return None

    async def kill(self) -> None:
        if self.proc is not None and self.proc.returncode is None:
            self.signal(signal.SIGKILL)
            await self.proc.wait()

    def output(self) -> bytes:
        return self.stdout_path.read_bytes() + self.stderr_path.read_bytes()


async def register_via_admin(cp: ControlPlane, name: str) -> dict[str, Any]:
    """Log in, take the CSRF token, register: what the admin page does."""
    jar = aiohttp.CookieJar(unsafe=True)
    async with aiohttp.ClientSession(cookie_jar=jar) as http:
        origin = {"Origin": cp.url}
        async with http.post(f"{cp.url}/api/app/login", headers=origin,
                             json={"username": cp.admin_user, "password": cp.admin_password}) as r:
            expect(r.status == 200, f"login answered {r.status}")
            csrf = (await r.json())["csrfToken"]
        async with http.post(f"{cp.url}/api/app/admin/runners",
                             headers={**origin, "X-CSRF-Token": csrf},
                             json={"name": name, "sourceNodeId": "local",
                                   "allowedProfiles": ["default"]}) as r:
            expect(r.status == 201, f"registration answered {r.status}")
            created: dict[str, Any] = await r.json()
        async with http.get(f"{cp.url}/api/app/admin/runners") as r:
            listing = await r.text()
        expect(created["token"] not in listing, "the runner list holds the token")
        return created


async def run_demo(runner_cmd: str, out_dir: Path, *, quiet: bool = False) -> DemoReport:
    out_dir.mkdir(parents=True, exist_ok=True)  # noqa: ASYNC240
    report = DemoReport(runner_cmd=runner_cmd)
    say: Callable[[str], None] = (lambda _m: None) if quiet else (lambda m: print(m, flush=True))
    work = Path(tempfile.mkdtemp(prefix="runner-demo-"))
    artifact_root = work / "artifacts"
    artifact_root.mkdir()
    (artifact_root / "report.txt").write_text("exported by the demo\n")
    (work / "secret.txt").write_text("outside every artifact root\n")
    timings = Timings(poll_hold=2.0, redelivery=1.0)
    secrets: list[str] = []

    async with ControlPlane(timings=timings) as cp, ScriptedHermes("slow") as hermes:
        report.server_url, report.hermes_url = cp.url, hermes.url
        secrets += [cp.admin_password or "", hermes.session_token or ""]
        say(f"control plane  {cp.url}")
        say(f"scripted Hermes {hermes.url}")
        created = await register_via_admin(cp, "demo-runner")
        runner_id, token = created["runner"]["id"], created["token"]
        secrets += [token, hashlib.sha256(token.encode()).hexdigest()]
        config = {"protocol": 1, "serverURL": cp.url, "runnerId": runner_id, "token": token,
                  "hermesURL": hermes.url, "allowedProfiles": ["default"],
                  "artifactRoots": [str(artifact_root)]}
        config_path = work / "runner.json"
        config_path.write_text(json.dumps(config))
        config_path.chmod(0o600)
        say(f"registered runner {runner_id}; config written to {config_path} (0600)")
        runner = RunnerProcess(runner_cmd, config_path, out_dir)
        await runner.start()
        say(f"runner started: {' '.join(runner.argv)}")
        say("")
        state: dict[str, Any] = {}

        async def step(name: str, requirement: str, body: Callable[[], Awaitable[str]]) -> None:
            st = Step(name, requirement)
            t0 = time.monotonic()
            try:
                st.detail = await asyncio.wait_for(body(), 30)
                st.status = "pass"
            except (StepFailed, TimeoutError, AssertionError) as exc:
                st.status, st.detail = "fail", str(exc) or type(exc).__name__
            st.seconds = round(time.monotonic() - t0, 3)
            report.steps.append(st)
            mark = "PASS" if st.status == "pass" else "FAIL"
            say(f"  [{mark}] {name:<28} {st.detail}")

        async def connects() -> str:
            epoch = await cp.wait_online(runner_id, timeout=20)
            polls = cp.history.filter(route="poll", runner_id=runner_id)
            expect(bool(polls) and bool(polls[0].reset), "the first poll did not carry x-runner-reset: 1")
            state["epoch"] = epoch
            return f"online, epoch {epoch[:13]}…, first poll was a reset poll"

        async def http_status() -> str:
            out = await cp.command(runner_id, "http", {"path": "/api/status", "method": "GET"})
            expect(out.ok, f"http GET /api/status → {out.status} {out.code}")
            body = json.loads(base64.b64decode(out.result["body"]))
            expect(body.get("version") == "0.19.0", "not Hermes' status body")
            admits = cp.history.filter(route="admit", runner_id=runner_id)
            expect(bool(admits), "the command ran without an admit")
            return f"status {out.result['status']}, Hermes {body['version']}, admitted first"

        async def http_forbidden() -> str:
            before = hermes.effects.count("http.mutation")
            out = await cp.command(runner_id, "http",
                                   {"path": "/api/config", "method": "PUT", "body": "e30="})
            expect(out.code == "runner_http_forbidden", f"PUT /api/config → {out.status} {out.code}")
            expect(hermes.effects.count("http.mutation") == before, "the mutation reached Hermes")
            return "PUT /api/config → 502 runner_http_forbidden; Hermes untouched"

        async def artifacts() -> str:
            ok = await cp.command(runner_id, "http", {
                "path": "/api/files/download", "method": "GET",
                "search": "?" + "path=" + str(artifact_root / "report.txt")})
            expect(ok.ok, f"download inside artifactRoots → {ok.status} {ok.code}")
            bad = await cp.command(runner_id, "http", {
                "path": "/api/files/download", "method": "GET",
                "search": "?path=" + str(artifact_root / ".." / "secret.txt")})
            expect(bad.code == "runner_artifact_forbidden", f"'..' escape → {bad.status} {bad.code}")
            reads = [e.detail.get("path", "") for e in hermes.effects.of("file.read")]
            expect(not any("secret" in p for p in reads), "Hermes served the file outside the roots")
            return "inside roots served; '..' escape → runner_artifact_forbidden"

        async def gateway_turn() -> str:
            ch = await cp.open_channel(runner_id, profile="default")
            state["channel"] = ch
            created = await cp.rpc(ch, "session.create", {"cols": 100, "title": "demo",
                                                          "profile": "default"})
            expect(created.ok, f"session.create → {created.status} {created.code}")
            sid = created.result["session_id"]
            state["sid"] = sid
            sub = await cp.rpc(ch, "prompt.submit", {"session_id": sid, "text": "hello"})
            expect(sub.ok, f"prompt.submit → {sub.status} {sub.code}")
            done = await ch.next_event("message.complete", timeout=10)
            text = done["payload"]["text"]
            expect(all(e.get("session_id") in (sid, None) for e in ch.events),
                   "an event of another session was forwarded")
            expect(hermes.effects.count("prompt.accepted", session_id=sid) == 1,
                   "Hermes did not receive the prompt exactly once")
            return f"session {sid}: {len(ch.events)} events, reply {text[:24]!r}…"

        async def foreign_session() -> str:
            other = await cp.open_channel(runner_id, profile="default")
            out = await cp.rpc(other, "prompt.submit", {"session_id": state["sid"], "text": "x"})
            expect(out.code == "runner_session_forbidden", f"foreign session → {out.code}")
            await cp.close_channel(other)
            return "prompt on another channel's session → runner_session_forbidden"

        async def dedupe() -> str:
            before = hermes.effects.count("prompt.accepted")
            cp.faults.duplicate_deliveries(1, mode="batch")
            mark = len(state["channel"].events)  # events may overtake the reply: mark first
            out = await cp.rpc(state["channel"], "prompt.submit",
                               {"session_id": state["sid"], "text": "again"})
            expect(out.ok, f"prompt.submit → {out.status} {out.code}")
            await state["channel"].next_event("message.complete", timeout=10, after=mark)
            # a duplicate delivery must not make a second Hermes effect
            results = cp.history.filter(route="result", runner_id=runner_id)
            expect(hermes.effects.count("prompt.accepted") == before + 1,
                   "a duplicated delivery reached Hermes twice")
            return f"delivered twice in one batch, executed once ({len(results)} results posted)"

        async def revoked() -> str:
            await cp.create_account("alice", allowed_profiles=["default"])
            # hold the admit at the control plane long enough to change the account in between
            cp.faults.delay_next("admit", n=1, seconds=2.0)
            handle = await cp.submit(runner_id, "http", {"path": "/api/status", "method": "GET"},
                                     account="alice")
            await handle.wait_delivered(10)
            await cp.bump_authorization("alice")
            out = await handle
            expect(out.code == "runner_command_not_admitted",
                   f"command after authorization change → {out.status} {out.code}")
            return "authorization changed before admit → runner_command_not_admitted"

        async def close_interrupts() -> str:
            ch = state["channel"]
            mark = len(ch.events)
            await cp.rpc(ch, "prompt.submit", {"session_id": state["sid"], "text": "HANGTEST"})
            await ch.next_event("message.delta", timeout=10, after=mark)
            out = await cp.close_channel(ch)
            expect(out.ok, f"gateway.close → {out.status} {out.code}")
            await hermes.effects.wait_for("session.interrupted", timeout=5, session_id=state["sid"])
            return "gateway.close interrupted the running turn"

        async def restart() -> str:
            old = cp.epoch(runner_id) or state["epoch"]
            await cp.restart()
            new = await cp.wait_online(runner_id, timeout=20)
            expect(new != old and new.split(":")[0] != old.split(":")[0], "no new hub epoch")
            out = await cp.command(runner_id, "http", {"path": "/api/status", "method": "GET"})
            expect(out.ok, f"command after restart → {out.status} {out.code}")
            return "server restarted; runner reconnected with a reset poll, new epoch works"

        async def sigterm() -> str:
            runner.signal(signal.SIGTERM)
            code = await runner.wait(15)
            report.exit_code = code
            expect(code == 0, f"exit code {code} after SIGTERM")
            expect(b"stopped" in runner.stderr_path.read_bytes(), "no 'stopped' line")
            return "SIGTERM → 'stopped', exit 0"

        try:
            for name, req, fn in [
                ("connects", "MUST poll with reset, then stay online", connects),
                ("http.read", "MUST forward allowlisted GETs after admit", http_status),
                ("http.forbidden", "MUST refuse non-allowlisted HTTP", http_forbidden),
                ("artifact.roots", "MUST confine downloads to artifactRoots", artifacts),
                ("gateway.turn", "MUST relay a session turn's events in order", gateway_turn),
                ("session.isolation", "MUST refuse foreign sessions", foreign_session),
                ("dedupe", "MUST run a duplicated command once", dedupe),
                ("admit.revoked", "MUST not run a command refused at admit", revoked),
                ("close.interrupts", "MUST interrupt running sessions on close", close_interrupts),
                ("epoch.restart", "MUST reconnect with a new epoch", restart),
                ("sigterm", "MUST stop cleanly on SIGTERM", sigterm),
            ]:
                if name != "connects" and report.steps and report.steps[0].status != "pass":
                    report.steps.append(Step(name, req, "fail", "skipped: runner never connected"))
                    continue
                await step(name, req, fn)
        finally:
            await runner.kill()
        output = runner.output()
        report.secrets_leaked = [f"secret #{i}" for i, s in enumerate(secrets)
                                 if s and s.encode() in output]
        history = [{"seq": ex.seq, "route": ex.route, "status": ex.status, "code": ex.code,
                    "epoch": ex.epoch} for ex in cp.history]
        (out_dir / "history.json").write_text(json.dumps(history, indent=1))
    text = json.dumps({**asdict(report), "passed": report.passed, "ok": report.ok}, indent=2)
    for s in secrets:
        if s:
            text = text.replace(s, "[redacted]")
    (out_dir / "report.json").write_text(text)
    say("")
    say(f"summary: {report.passed}/{len(report.steps)} steps passed; runner exit code "
        f"{report.exit_code}; secrets in runner output: {len(report.secrets_leaked)}")
    say(f"report: {out_dir / 'report.json'}")
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m conformance demo")
    parser.add_argument("--runner-cmd", default=DEFAULT_RUNNER_CMD,
                        help="command template; {config} is replaced by the runner.json path")
    parser.add_argument("--out", default="reports/demo", type=Path)
    args = parser.parse_args(argv)
    report = asyncio.run(run_demo(args.runner_cmd, args.out))
    return 0 if report.ok else 1
