"""The one low-level process helper: a child in its own process group, watched and always reaped.

Rules:
- The child starts in a new session (``start_new_session``), so it leads its own process group
  and every signal goes to the whole group (``os.killpg``), grandchildren included.
- The environment is scrubbed (:func:`scrubbed_env`): no ``HERMES_*``, no ``FAKE_SERVER*``, and
  no variable whose value holds a secret the caller names. stdin is closed (``/dev/null``).
- stdout and stderr are pipes read continuously by two reader tasks: every byte is kept (and
  optionally teed to a file), so output can be scanned and :meth:`Process.wait_line` is awaited
  on the readers' wake-ups, never a polling sleep. A line wait fails at once when the process
  exits before the line arrives (:class:`ProcessExited`).
- :meth:`Process.stop` is SIGTERM → wait → SIGKILL and returns the exit code;
  :meth:`Process.reap` SIGKILLs the group *synchronously first* (so a cancelled caller still
  leaves nothing running), then waits for the leader and drains the pipes. Every process started
  is also registered for an ``atexit`` SIGKILL of its group.
- ``faketime_offset`` runs the child with Debian's libfaketime preloaded exactly as
  ``faketime -m -f "+<offset>s"`` would (:func:`faketime_env`; the wrapper itself is not used
  because it forks and would swallow the exit code); the monotonic clock is left alone.
- ``faketime_file`` instead runs the child on a *live* clock: libfaketime re-reads the offset from
  that file at every clock read (``FAKETIME_TIMESTAMP_FILE`` + ``FAKETIME_NO_CACHE``), so a
  caller moves the child's time mid-run by rewriting it (:func:`write_clock_offset`). The
  monotonic clock moves with it (asyncio's loop time included): a timer the child armed on
  either clock fires at its next loop wake-up after a jump past its due time.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import os
import re
import signal
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Literal

from . import environment
from .bounds import scaled

SCRUBBED_PREFIXES = ("HERMES_", "FAKE_SERVER")
DRAIN_TIMEOUT = 2.0  # after the leader exits, how long the pipes may take to reach EOF
Stream = Literal["stdout", "stderr"]

_LIVE_GROUPS: dict[int, str | None] = {}  # pgid → the leader's start time (/proc stat field 22)


def _start_time(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


@atexit.register
def kill_leftover_groups() -> None:
    """A last resort for a caller that never reaped: SIGKILL each group still ours — its leader
    is the process we started (same start time), or the leader is gone and members remain (a
    live group's id is never handed out again, so those members are ours)."""
    for pgid, started in list(_LIVE_GROUPS.items()):
        now = _start_time(pgid)
        if (now is not None and now == started) or (now is None and live_group_members(pgid)):
            with contextlib.suppress(OSError):
                os.killpg(pgid, signal.SIGKILL)


class ProcessError(Exception):
    """Base of this module's errors; the message is one line, safe to print."""


class StartError(ProcessError):
    """The command could not be started (not found, not executable, bad argv)."""


class MissingProgram(StartError):
    """A program the harness needs is not installed (conformance/environment.py)."""


class ProcessExited(ProcessError):
    """The process exited while the caller waited for something else."""

    def __init__(self, message: str, returncode: int, tail: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.returncode = returncode
        self.tail = list(tail)


class LineTimeout(ProcessError, TimeoutError):
    """No matching line within the timeout (the process still runs)."""


def scrubbed_env(extra: Mapping[str, str] | None = None, *, secrets: Iterable[str] = (),
                 base: Mapping[str, str] | None = None) -> dict[str, str]:
    """``base`` (default ``os.environ``) without ``HERMES_*``/``FAKE_SERVER*`` and without any
    variable whose value contains one of ``secrets``; then ``extra`` on top (also checked)."""
    values = [s for s in secrets if s]
    env = {k: v for k, v in (os.environ if base is None else base).items()
           if not k.startswith(SCRUBBED_PREFIXES)}
    env.update(extra or {})
    return {k: v for k, v in env.items() if not any(s in v for s in values)}


FAKETIME_LIB = "/usr/$LIB/faketime/libfaketimeMT.so.1"  # what /usr/bin/faketime -m preloads


def faketime_installed() -> bool:
    """Whether Debian's libfaketime (package ``faketime``) is there to preload (the one
    table: :data:`conformance.environment.PROGRAMS`)."""
    return environment.installed("faketime")


def faketime_env(offset: float, *, fake_monotonic: bool = False,
                 base: Mapping[str, str] | None = None,
                 timestamp_file: Path | None = None) -> dict[str, str]:
    """Environment additions running a program ``offset`` seconds ahead (negative: behind).

    It sets what ``faketime -m -f "+<offset>s" CMD`` sets (``LD_PRELOAD`` of libfaketimeMT,
    ``FAKETIME``) instead of prefixing the wrapper: the wrapper forks and waits, so a SIGTERM to
    the group kills it too and the caller sees -15 instead of the program's own exit code.
    ``$LIB`` is expanded by the dynamic loader, as the wrapper relies on. With
    ``timestamp_file`` the offset is read from that file at every clock read instead (see
    :func:`write_clock_offset`; ``offset`` is written there first)."""
    environment.note_use("faketime")
    if not faketime_installed():
        raise MissingProgram("faketime is not installed (Debian package 'faketime')")
    preload = (base or {}).get("LD_PRELOAD", "")
    env = {"LD_PRELOAD": f"{FAKETIME_LIB} {preload}".strip(), "FAKETIME": f"{offset:+.6f}s"}
    if timestamp_file is not None:
        write_clock_offset(timestamp_file, offset)
        del env["FAKETIME"]
        env.update(FAKETIME_TIMESTAMP_FILE=str(timestamp_file), FAKETIME_NO_CACHE="1")
    if not fake_monotonic:
        env["FAKETIME_DONT_FAKE_MONOTONIC"] = "1"
    return env


SHM_DIR = Path("/dev/shm")


def forget_faketime_state(pid: int) -> None:
    """Remove the semaphore and shared memory libfaketime made for ``pid`` (``faketime_sem_<pid>``
    and ``faketime_shm_<pid>``). The library removes them at a clean exit; a runner killed with
    SIGKILL (every crash story) leaves them, a pair per kill, for the machine's life."""
    for name in (f"sem.faketime_sem_{pid}", f"faketime_shm_{pid}"):
        with contextlib.suppress(OSError):
            (SHM_DIR / name).unlink()


def write_clock_offset(path: Path, offset: float) -> None:
    """Set a live-clock child's offset (seconds ahead of the wall clock): the file is replaced
    atomically, so the child never reads a half-written offset."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(f"{offset:+.6f}s\n")
    os.replace(tmp, path)


def live_group_members(pgid: int) -> list[int]:
    """Pids of processes in group ``pgid`` that are not zombies (Linux ``/proc``)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[-1].split()
        if len(fields) > 2 and fields[2] == str(pgid) and fields[0] not in ("Z", "X"):
            found.append(int(entry.name))
    return found


def _group_exists(pgid: int) -> bool:
    """False when no process (not even a zombie) is left in the group: signal 0 says so
    without reading every ``/proc/*/stat`` (the common case once the leader is reaped)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


async def _until_gone(pgid: int, bound: float = DRAIN_TIMEOUT) -> None:
    """After the group was SIGKILLed: a member that held no pipe gives no event to await, so
    look at ``/proc`` until none is left (bounded; normally it is empty at the first look)."""
    loop = asyncio.get_running_loop()
    end = loop.time() + bound
    while _group_exists(pgid) and live_group_members(pgid) and loop.time() < end:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)  # one forked while the first kill was delivered
        await asyncio.sleep(0.01)


class _Capture:
    """One output stream: every byte, the complete lines, an optional tee file."""

    def __init__(self, name: Stream, tee: Path | None) -> None:
        self.name = name
        self.data = bytearray()
        self.lines: list[str] = []
        self._partial = b""
        self.tee = tee
        self.eof = False

    def feed(self, chunk: bytes) -> None:
        self.data += chunk
        if self.tee is not None:
            with self.tee.open("ab") as fh:
                fh.write(chunk)
        parts = (self._partial + chunk).split(b"\n")
        self._partial = parts.pop()
        self.lines += [p.decode(errors="replace").rstrip("\r") for p in parts]

    def close(self) -> None:
        if self._partial:
            self.lines.append(self._partial.decode(errors="replace"))
            self._partial = b""
        self.eof = True


class Process:
    """A started child process (see the module rules). Use as ``async with`` to always reap."""

    def __init__(self, argv: Sequence[str], *, env: Mapping[str, str] | None = None,
                 cwd: str | Path | None = None, tee_dir: Path | None = None,
                 tee_stem: str = "process", faketime_offset: float | None = None,
                 faketime_file: Path | None = None, secrets: Iterable[str] = ()) -> None:
        if not argv:
            raise StartError("empty command")
        self.argv = [str(a) for a in argv]
        self.env = dict(env) if env is not None else scrubbed_env(secrets=secrets)
        if faketime_file is not None:
            self.env.update(faketime_env(faketime_offset or 0.0, base=self.env,
                                         fake_monotonic=True, timestamp_file=faketime_file))
        elif faketime_offset is not None:
            self.env.update(faketime_env(faketime_offset, base=self.env))
        self.cwd = str(cwd) if cwd is not None else None
        tee = (lambda s: tee_dir / f"{tee_stem}.{s}") if tee_dir is not None else (lambda s: None)
        self.stdout = _Capture("stdout", tee("stdout"))
        self.stderr = _Capture("stderr", tee("stderr"))
        self.proc: asyncio.subprocess.Process | None = None
        self._changed = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []

    # -- lifecycle ---------------------------------------------------------------------------

    async def start(self) -> Process:
        if self.proc is not None:
            raise ProcessError("already started")
        for cap in (self.stdout, self.stderr):
            if cap.tee is not None:
                fd = os.open(cap.tee, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                os.close(fd)
        try:
            self.proc = await asyncio.create_subprocess_exec(
                *self.argv, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE, env=self.env, cwd=self.cwd,
                start_new_session=True)
        except (OSError, ValueError) as exc:
            raise StartError(f"cannot start {self.argv[0]!r}: {exc.strerror or exc}"
                             if isinstance(exc, OSError) else f"cannot start: {exc}") from None
        _LIVE_GROUPS[self.proc.pid] = _start_time(self.proc.pid)
        assert self.proc.stdout is not None and self.proc.stderr is not None
        self._tasks = [asyncio.create_task(self._read(self.proc.stdout, self.stdout)),
                       asyncio.create_task(self._read(self.proc.stderr, self.stderr)),
                       asyncio.create_task(self._watch_exit())]
        return self

    async def _read(self, reader: asyncio.StreamReader, cap: _Capture) -> None:
        try:
            while chunk := await reader.read(65536):
                cap.feed(chunk)
                self._changed.set()
        finally:
            cap.close()
            self._changed.set()

    async def _watch_exit(self) -> None:
        assert self.proc is not None
        await self.proc.wait()
        self._changed.set()

    async def __aenter__(self) -> Process:
        return await self.start() if self.proc is None else self

    async def __aexit__(self, *exc: object) -> None:
        await self.reap()

    # -- state -------------------------------------------------------------------------------

    @property
    def pid(self) -> int:
        if self.proc is None:
            raise ProcessError("not started")
        return self.proc.pid

    @property
    def returncode(self) -> int | None:
        return None if self.proc is None else self.proc.returncode

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.returncode is None

    def output(self) -> bytes:
        """Every byte of stdout then stderr read so far."""
        return bytes(self.stdout.data) + bytes(self.stderr.data)

    def lines(self, stream: Stream | None = None) -> list[str]:
        """Complete lines of one stream (None: stderr then stdout)."""
        if stream is not None:
            return list(self.stdout.lines if stream == "stdout" else self.stderr.lines)
        return self.stderr.lines + self.stdout.lines

    def tail(self, n: int = 20) -> list[str]:
        """The last ``n`` stderr lines (stdout's when stderr is empty)."""
        return (self.stderr.lines or self.stdout.lines)[-n:]

    # -- waits -------------------------------------------------------------------------------

    async def wait_line(self, pattern: str | re.Pattern[str], timeout: float, *,
                        stream: Stream | None = "stderr", count: int = 1, since: int = 0) -> str:
        """The ``count``-th line (from line index ``since``) of ``stream`` (None: either) that
        contains ``pattern`` (a str is a literal, a compiled pattern is searched). Raises
        :class:`ProcessExited` once the process has exited and its output is drained without
        the line, :class:`LineTimeout` after ``timeout`` seconds."""
        rx = pattern if isinstance(pattern, re.Pattern) else re.compile(re.escape(pattern))
        caps = [self.stdout, self.stderr] if stream is None else \
            [self.stdout if stream == "stdout" else self.stderr]

        def found() -> str | None:
            hits = [ln for cap in caps for ln in cap.lines[since:] if rx.search(ln)]
            return hits[count - 1] if len(hits) >= count else None

        loop = asyncio.get_running_loop()
        timeout = scaled(timeout)
        end = loop.time() + timeout
        drained_by: float | None = None
        while True:
            self._changed.clear()
            if (line := found()) is not None:
                return line
            now = loop.time()
            if not self.running and self.proc is not None:
                if all(c.eof for c in caps) or (drained_by is not None and now >= drained_by):
                    raise ProcessExited(
                        f"process exited with code {self.returncode} before a line matching "
                        f"{rx.pattern!r}", self.returncode or 0, self.tail())
                drained_by = drained_by or now + DRAIN_TIMEOUT
            if now >= end:
                raise LineTimeout(f"no line matching {rx.pattern!r} within {timeout}s")
            limit = min(end, drained_by) if drained_by is not None else end
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), max(0.0, limit - now))

    async def wait(self, timeout: float | None = None) -> int:
        """The exit code (``-N`` for signal N); raises ``TimeoutError`` after ``timeout``."""
        if self.proc is None:
            raise ProcessError("not started")
        code = await asyncio.wait_for(self.proc.wait(), None if timeout is None else scaled(timeout))
        await self._drain()
        return code

    async def _drain(self) -> None:
        readers = [t for t in self._tasks[:2] if not t.done()]
        if readers:
            await asyncio.wait(readers, timeout=DRAIN_TIMEOUT)

    # -- signals -----------------------------------------------------------------------------

    def signal(self, sig: int) -> None:
        """Send ``sig`` to the whole process group (no-op once the group is gone)."""
        if self.proc is None:
            raise ProcessError("not started")
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, sig)

    async def stop(self, timeout: float = 10.0) -> int:
        """SIGTERM the group, wait up to ``timeout``, then SIGKILL; returns the exit code."""
        if self.running:
            self.signal(signal.SIGTERM)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(self._wait_proc()), timeout)
        code = await self.reap()
        assert code is not None
        return code

    async def kill(self) -> int:
        """SIGKILL the group now; returns the exit code (``-9`` unless it had exited)."""
        code = await self.reap()
        assert code is not None
        return code

    async def _wait_proc(self) -> int:
        assert self.proc is not None
        return await self.proc.wait()

    async def reap(self) -> int | None:
        """SIGKILL whatever is left of the group, wait for the leader, drain the pipes, stop the
        reader tasks. Idempotent; safe under cancellation (the kill happens before any await)."""
        if self.proc is None:
            return None
        pgid = self.proc.pid
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)
        try:
            code = await asyncio.shield(self._wait_proc())
            await self._drain()
            await _until_gone(pgid)
        finally:
            _LIVE_GROUPS.pop(pgid, None)
            if FAKETIME_LIB in self.env.get("LD_PRELOAD", ""):
                forget_faketime_state(pgid)
            for t in self._tasks:
                if not t.done():
                    t.cancel()
        return code
