"""``RunnerUnderTest``: the one black-box runner adapter (the vendor contract's harness side).

Rules:
- The command is a template holding ``{config}``; it is replaced by the shell-quoted path of a
  ``runner.json`` (mode 0600) in a fresh private temp directory, then split with ``shlex``.
  A template without ``{config}``, or one ``shlex`` cannot split → :class:`TemplateError`;
  a command that cannot be executed → :class:`RunnerStartError`. Both are
  :class:`AdapterError`, whose message is one line a CLI can print as is.
- The runner runs through :class:`conformance.process.Process`: own process group, scrubbed
  environment (no ``HERMES_*``/``FAKE_SERVER*``, nothing holding a known secret), stdin closed,
  every output byte kept in memory (never in a file left behind).
- Its state directory is wherever the runner puts it next to its config (``<dir>/state`` for
  the reference runner): inside the temp directory, kept across :meth:`restart`, removed by
  :meth:`close` with everything else.
- Every wait races the process: if it exits first, :class:`RunnerExited` says so at once with
  the exit code and the redacted last stderr lines.
- The secrets it knows (the config's ``token`` and ``hermesCredentials.password``, plus any the
  caller adds) are scanned for in all output of all runs (:meth:`leaks`) and redacted from
  everything it reports.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import shlex
import shutil
from collections.abc import Awaitable, Mapping, Sequence
from pathlib import Path
from signal import SIGKILL, SIGTERM
from typing import Any, Protocol, TypeVar

from .bounds import scaled
from .process import (
    LineTimeout,
    Process,
    ProcessExited,
    StartError,
    scrubbed_env,
    write_clock_offset,
)
from .scratch import make_dir
from .secrets import Leak, Secrets

T = TypeVar("T")
PLACEHOLDER = "{config}"
VERSION_TIMEOUT = 3.0


class AdapterError(Exception):
    """A one-line, secret-free error about the runner command (CLI: print it, exit 2)."""


class TemplateError(AdapterError):
    pass


class RunnerStartError(AdapterError):
    pass


class RunnerExited(AdapterError):
    """The runner exited while the harness waited for something."""

    def __init__(self, message: str, returncode: int | None, tail: Sequence[str]) -> None:
        super().__init__(message)
        self.returncode = returncode
        self.tail = list(tail)


class OnlineWaiter(Protocol):
    """What :meth:`RunnerUnderTest.wait_online` needs from a control plane."""

    async def wait_online(self, runner_id: str, timeout: float = ...) -> str: ...
    async def wait_epoch_change(self, runner_id: str, old: str | None,
                                timeout: float = ...) -> str: ...


def split_template(template: str, config_path: str | Path) -> list[str]:
    """The argv of ``template`` with ``{config}`` replaced by the quoted ``config_path``."""
    if PLACEHOLDER not in template:
        raise TemplateError(f"the runner command must contain {PLACEHOLDER} "
                            "(it is replaced by the path of runner.json)")
    try:
        argv = shlex.split(template.replace(PLACEHOLDER, shlex.quote(str(config_path))))
    except ValueError as exc:
        raise TemplateError(f"the runner command cannot be split: {exc}") from None
    if not argv:
        raise TemplateError("the runner command is empty")
    return argv


def config_secrets(config: Mapping[str, Any]) -> Secrets:
    """The secrets a runner.json holds: ``token`` and ``hermesCredentials.password``."""
    found = Secrets()
    found.add("runner token", config.get("token") if isinstance(config.get("token"), str) else None)
    creds = config.get("hermesCredentials")
    if isinstance(creds, dict) and isinstance(creds.get("password"), str):
        found.add("Hermes password", creds["password"])
    return found


class RunnerUnderTest:
    """A runner command, its config and state directory, its runs, signals and output.

    ``async with RunnerUnderTest(cmd, config) as runner: await runner.start()`` — leaving the
    block reaps every process group and removes the temp directory."""

    def __init__(self, command: str, config: Mapping[str, Any], *,
                 secrets: Secrets | None = None, env: Mapping[str, str] | None = None,
                 files: Sequence[str | Path] = (), name: str = "runner") -> None:
        split_template(command, "runner.json")  # fail early on a bad template
        self.command = command
        self.config = dict(config)
        self.name = name
        self.files = [Path(f) for f in files]
        self.secrets = config_secrets(self.config)
        if secrets is not None:
            self.secrets.update(secrets)
        self._extra_env = dict(env or {})
        self._dir: Path | None = None
        self.runs: list[Process] = []
        self._clock_file: Path | None = None   # set while a run has a live clock
        self.clock_offset = 0.0                # its offset (seconds ahead of the wall clock)

    # -- files -------------------------------------------------------------------------------

    @property
    def directory(self) -> Path:
        """The private temp directory holding runner.json (created on first use)."""
        if self._dir is None:
            self._dir = make_dir("runner")
        return self._dir

    @property
    def config_path(self) -> Path:
        return self.directory / "runner.json"

    def write_config(self) -> Path:
        path = self.config_path
        path.unlink(missing_ok=True)
        path.touch(mode=0o600)
        path.chmod(0o600)
        path.write_text(json.dumps(self.config))
        return path

    @property
    def argv(self) -> list[str]:
        return split_template(self.command, self.config_path)

    # -- lifecycle ---------------------------------------------------------------------------

    @property
    def process(self) -> Process | None:
        """The current (latest) run."""
        return self.runs[-1] if self.runs else None

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.running

    @property
    def returncode(self) -> int | None:
        return self.process.returncode if self.process else None

    @property
    def pid(self) -> int:
        if self.process is None:
            raise AdapterError("the runner was not started")
        return self.process.pid

    async def start(self, *, faketime_offset: float | None = None,
                    live_clock: bool = False) -> Process:
        """Start one run (same config and state directory as any earlier run). With
        ``live_clock`` the run's clocks (wall and monotonic) start ``faketime_offset`` (or 0)
        seconds ahead and move on :meth:`advance_clock` without a restart (opt-in: libfaketime
        then re-reads a file at every clock read)."""
        if self.running:
            raise AdapterError("the runner is already running")
        if not self.config_path.exists():
            self.write_config()
        env = scrubbed_env(self._extra_env, secrets=self.secrets)
        self.clock_offset = faketime_offset or 0.0
        self._clock_file = self.directory / ".faketime-offset" if live_clock else None
        proc = Process(self.argv, env=env, cwd=self.directory, faketime_offset=faketime_offset,
                       faketime_file=self._clock_file)
        try:
            await proc.start()
        except StartError as exc:
            raise RunnerStartError(f"the runner command does not start: {exc}") from None
        self.runs.append(proc)
        return proc

    def advance_clock(self, seconds: float) -> float:
        """Move the live clock of the current run ``seconds`` ahead (wall and monotonic time,
        at once); the new offset. The runner sees it at its next clock read; a timer it armed
        fires at its next event-loop wake-up. Only for a run started with ``live_clock``."""
        if self._clock_file is None or not self.running:
            raise AdapterError("advance_clock needs a run started with live_clock=True")
        self.clock_offset += seconds
        write_clock_offset(self._clock_file, self.clock_offset)
        return self.clock_offset

    def signal(self, sig: int) -> None:
        if self.process is not None:
            self.process.signal(sig)

    async def wait(self, timeout: float | None = None) -> int:
        """The current run's exit code (``TimeoutError`` after ``timeout``)."""
        if self.process is None:
            raise AdapterError("the runner was not started")
        return await self.process.wait(timeout)

    async def terminate(self, timeout: float = 10.0) -> int | None:
        """SIGTERM and wait for the exit code, without escalating (None: still running)."""
        self.signal(SIGTERM)
        try:
            return await self.wait(timeout)
        except TimeoutError:
            return None

    async def stop(self, timeout: float = 10.0) -> int | None:
        """SIGTERM → wait → SIGKILL; the exit code (None if never started)."""
        return await self.process.stop(timeout) if self.process else None

    async def kill(self) -> int | None:
        """SIGKILL the group now (a crash); the exit code."""
        return await self.process.kill() if self.process else None

    async def restart(self, *, faketime_offset: float | None = None, sig: int = SIGTERM,
                      timeout: float = 10.0) -> Process:
        """Stop the current run (``sig``: SIGTERM for a clean stop, SIGKILL for a crash), then
        start again with the same config and state directory."""
        proc = self.process
        if proc is not None:
            if sig == SIGKILL:
                await proc.kill()
            elif sig == SIGTERM:
                await proc.stop(timeout)  # one SIGTERM: a second one may mean "die now"
            else:
                proc.signal(sig)
                with contextlib.suppress(TimeoutError):
                    await proc.wait(timeout)
                await proc.reap()
        return await self.start(faketime_offset=faketime_offset)

    async def close(self) -> None:
        """Reap every run and remove the temp directory (runner.json and state). Idempotent."""
        try:
            for proc in self.runs:
                await proc.reap()
        finally:
            if self._dir is not None:
                shutil.rmtree(self._dir, ignore_errors=True)
                self._dir = None

    async def __aenter__(self) -> RunnerUnderTest:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- waits -------------------------------------------------------------------------------

    def _exited(self, what: str) -> RunnerExited:
        code = self.returncode
        tail = [self.secrets.redact(line) for line in (self.process.tail() if self.process else [])]
        last = f"; last output: {tail[-1][:200]}" if tail else "; no output"
        return RunnerExited(f"the runner exited with code {code} before {what}{last}", code, tail)

    async def guard(self, awaitable: Awaitable[T], what: str, timeout: float) -> T:
        """Await ``awaitable`` unless the runner exits first (→ :class:`RunnerExited` at once)
        or ``timeout`` passes (→ ``TimeoutError``)."""
        if self.process is None:
            raise AdapterError("the runner was not started")
        work: asyncio.Future[T] = asyncio.ensure_future(awaitable)
        exit_task: asyncio.Future[Any] = asyncio.ensure_future(self.process.wait())
        both: set[asyncio.Future[Any]] = {work, exit_task}
        try:
            timeout = scaled(timeout)
            done, _ = await asyncio.wait(both, timeout=timeout,
                                         return_when=asyncio.FIRST_COMPLETED)
            if work in done:
                return work.result()
            if exit_task in done:
                raise self._exited(what)
            raise TimeoutError(f"{what}: not within {timeout}s (the runner still runs)")
        finally:
            for fut in (work, exit_task):
                if not fut.done():
                    fut.cancel()
            await asyncio.gather(work, exit_task, return_exceptions=True)

    async def wait_online(self, cp: OnlineWaiter, runner_id: str | None = None,
                          timeout: float = 20.0, *, other_than: str | None = None) -> str:
        """The runner's epoch once the control plane sees it online (with an epoch other than
        ``other_than`` when given); fails fast if the runner exits."""
        rid = runner_id or str(self.config.get("runnerId"))
        aw = (cp.wait_epoch_change(rid, other_than, timeout=timeout + 1) if other_than
              else cp.wait_online(rid, timeout=timeout + 1))
        return await self.guard(aw, "it came online", timeout)

    async def wait_line(self, pattern: str, timeout: float = 10.0, *, count: int = 1,
                        since: int = 0) -> str:
        """A stderr line containing ``pattern`` (redacted); fails fast if the runner exits."""
        if self.process is None:
            raise AdapterError("the runner was not started")
        try:
            line = await self.process.wait_line(pattern, timeout, count=count, since=since)
        except ProcessExited:
            raise self._exited(f"printing {pattern!r}") from None
        except LineTimeout:
            raise TimeoutError(f"no stderr line with {pattern!r} within {timeout}s") from None
        return self.secrets.redact(line)

    # -- output, secrets, identity -----------------------------------------------------------

    def output(self) -> bytes:
        """Every byte of every run, stdout and stderr (unredacted: scan it, never print it)."""
        return b"".join(p.output() for p in self.runs)

    def stderr_text(self) -> str:
        """All runs' stderr, redacted."""
        return self.secrets.redact(
            "".join(bytes(p.stderr.data).decode(errors="replace") for p in self.runs))

    def redacted_output(self) -> tuple[str, str]:
        """(stdout, stderr) of all runs, redacted."""
        out = "".join(bytes(p.stdout.data).decode(errors="replace") for p in self.runs)
        return self.secrets.redact(out), self.stderr_text()

    def leaks(self) -> list[Leak]:
        """The known secrets found in any byte the runner printed."""
        found: list[Leak] = []
        for i, proc in enumerate(self.runs, 1):
            for stream in (proc.stdout, proc.stderr):
                found += self.secrets.leaks(bytes(stream.data), f"{self.name} {stream.name} (run {i})")
        return found

    async def identity(self, timeout: float = VERSION_TIMEOUT) -> dict[str, Any]:
        """For a certificate: the command template, what ``--version`` answers (None when the
        runner does not answer within ``timeout`` or exits non-zero) and the sha256 of
        ``files``."""
        hashes = []
        for f in self.files:
            try:
                hashes.append({"path": str(f), "sha256": hashlib.sha256(f.read_bytes()).hexdigest()})
            except OSError as exc:
                hashes.append({"path": str(f), "error": exc.strerror or "unreadable"})
        return {"command": self.secrets.redact(self.command),
                "version": await self._version(timeout), "files": hashes}

    def version_argv(self) -> list[str]:
        """The template's argv without ``{config}`` (and the option right before it, such as
        ``--config``), plus ``--version``."""
        argv = shlex.split(self.command)
        if PLACEHOLDER in argv:
            i = argv.index(PLACEHOLDER)
            drop = {i, i - 1} if i > 0 and argv[i - 1].startswith("-") else {i}
            argv = [a for j, a in enumerate(argv) if j not in drop]
        return [a.replace(PLACEHOLDER, "") for a in argv] + ["--version"]

    async def _version(self, timeout: float) -> str | None:
        proc = Process(self.version_argv(), env=scrubbed_env(self._extra_env, secrets=self.secrets),
                       cwd=self.directory)
        try:
            await proc.start()
        except StartError:
            return None
        try:
            code = await proc.wait(timeout)
        except TimeoutError:
            return None
        finally:
            await proc.reap()
        lines = [ln.strip() for ln in proc.lines("stdout") + proc.lines("stderr") if ln.strip()]
        return self.secrets.redact(lines[0])[:200] if code == 0 and lines else None
