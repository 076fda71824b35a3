"""The end-to-end demonstration: a runner, driven as a black box, through the whole path.

``python -m conformance demo [--runner-cmd "CMD --config {config}"] [--out DIR]``

It opens a :class:`~conformance.world.World`: the simulated control plane and the scripted Hermes
in process, a runner registered through the admin API (login, CSRF, exact Origin) exactly as an
administrator would, its ``runner.json`` (mode 0600) in a private temp directory that is removed
afterwards, and the runner command (:class:`~conformance.adapter.RunnerUnderTest`) in its own
process group. Then it drives commands through it. Each step is checked against what reached the
control plane (its history) and what reached Hermes (its effect log). It prints one line per
step, a summary, and writes ``report.json``, ``transcript.json`` and the runner's output (all
redacted) to ``--out``.

This module treats the runner as a black box: it never imports ``runner_ref``.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from fake_server import Timings

from .adapter import AdapterError, split_template
from .reference_cmd import REFERENCE_RUNNER_CMD
from .worlds import open_world

PROFILE = "default"


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


async def run_demo(runner_cmd: str, out_dir: Path, *, quiet: bool = False) -> DemoReport:
    """Run the walkthrough; raises :class:`~conformance.adapter.AdapterError` for a bad
    template or a command that does not start (the CLI prints it in one line)."""
    split_template(runner_cmd, "runner.json")  # a bad template fails before anything is made
    out_dir.mkdir(parents=True, exist_ok=True)  # noqa: ASYNC240
    report = DemoReport(runner_cmd=runner_cmd)
    say: Callable[[str], None] = (lambda _m: None) if quiet else (lambda m: print(m, flush=True))
    timings = Timings(poll_hold=2.0, redelivery=1.0)

    async with open_world(runner_cmd, profiles=[PROFILE], hermes_script="slow", timings=timings,
                          runner_name="demo-runner", start_runner=False) as world:
        cp, hermes, runner = world.cp, world.hermes, world.runner
        assert runner is not None
        runner_id = world.runner_id
        artifact_root = world.artifact_root
        (artifact_root / "report.txt").write_text("exported by the demo\n")
        (artifact_root.parent / "secret.txt").write_text("outside every artifact root\n")
        report.server_url, report.hermes_url = cp.url, hermes.url
        say(f"control plane  {cp.url}")
        say(f"scripted Hermes {hermes.url}")
        listing = json.dumps(await world.admin.listing())
        if world.registered.token in listing:
            report.secrets_leaked.append("runner token in the admin runner list")
        say(f"registered runner {runner_id} through the admin API; runner.json written (0600) "
            "into a private temp directory")
        await world.start_runner(wait_online=False)
        say(f"runner started: {' '.join(runner.argv)}")
        say("")
        state: dict[str, Any] = {}

        async def step(name: str, requirement: str, body: Callable[[], Awaitable[str]]) -> None:
            st = Step(name, requirement)
            t0 = time.monotonic()
            try:
                st.detail = await asyncio.wait_for(body(), 30)
                st.status = "pass"
            except (StepFailed, TimeoutError, AssertionError, AdapterError) as exc:
                st.status, st.detail = "fail", world.redact(str(exc) or type(exc).__name__)
            st.seconds = round(time.monotonic() - t0, 3)
            report.steps.append(st)
            mark = "PASS" if st.status == "pass" else "FAIL"
            say(f"  [{mark}] {name:<28} {st.detail}")

        def download(path: Path) -> dict[str, Any]:
            # the upstream control plane always names the profile it means
            return {"path": "/api/files/download", "method": "GET",
                    "search": "?" + urlencode({"profile": PROFILE, "path": str(path)}, safe="/")}

        async def connects() -> str:
            epoch = await runner.wait_online(cp, runner_id, timeout=20)
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
            ok = await cp.command(runner_id, "http", download(artifact_root / "report.txt"))
            expect(ok.ok, f"download inside artifactRoots → {ok.status} {ok.code}")
            bad = await cp.command(runner_id, "http", download(artifact_root / ".." / "secret.txt"))
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
            new = await runner.wait_online(cp, runner_id, timeout=20, other_than=old)
            expect(new != old and new.split(":")[0] != old.split(":")[0], "no new hub epoch")
            out = await cp.command(runner_id, "http", {"path": "/api/status", "method": "GET"})
            expect(out.ok, f"command after restart → {out.status} {out.code}")
            return "server restarted; runner reconnected with a reset poll, new epoch works"

        async def sigterm() -> str:
            code = await runner.terminate(15)
            report.exit_code = code
            expect(code == 0, f"exit code {code} after SIGTERM")
            expect("stopped" in runner.stderr_text(), "no 'stopped' line")
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
        if report.exit_code is None:
            report.exit_code = runner.returncode
        report.secrets_leaked += [str(leak) for leak in world.scan_for_secrets()]
        stdout, stderr = runner.redacted_output()
        (out_dir / "runner.stdout").write_text(stdout)
        (out_dir / "runner.stderr").write_text(stderr)
        (out_dir / "transcript.json").write_text(json.dumps(world.transcript(), indent=1))
        text = world.redact(json.dumps({**asdict(report), "passed": report.passed,
                                        "ok": report.ok}, indent=2))
    (out_dir / "report.json").write_text(text)
    say("")
    say(f"summary: {report.passed}/{len(report.steps)} steps passed; runner exit code "
        f"{report.exit_code}; secrets leaked: {len(report.secrets_leaked)}")
    say(f"report: {out_dir / 'report.json'}")
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m conformance demo")
    parser.add_argument("--runner-cmd", default=REFERENCE_RUNNER_CMD,
                        help="command template; {config} is replaced by the runner.json path")
    parser.add_argument("--out", default="reports/demo", type=Path)
    args = parser.parse_args(argv)
    try:
        report = asyncio.run(run_demo(args.runner_cmd, args.out))
    except AdapterError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0 if report.ok else 1
