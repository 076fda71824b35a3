"""``python -m tests.oracle_fairness.strict_late_runner --config runner.json``: a *correct* runner
that takes two choices the reference runner takes the other way (test-only; the positive
controls package of issue 21 item 5 builds the real ones on the same seams).

Rules:
- **profile-required**: a command that names no profile is refused 403 ``runner_profile_forbidden``
  wherever requireProfile applies (docs/protocol.md §3: "What a runner does with a command that
  names none is an implementation choice — not tested"). Seam ``runner_ref.allowlists:require_profile``
  (rebound in every module that imported it).
- **poll-after-admit**: the next poll is sent only once the admit of every command the last poll
  delivered was answered (or the command ended without one), at most ``ADMIT_WAIT`` seconds
  (wall) after the answer — "within a few seconds", §2.5. Seams ``runner_ref.poll_loop:PollLoop._take_answer``,
  ``…PollLoop._admit_gate`` and ``…PollLoop._deliver``.
Everything else is the reference runner (``negative_controls.seams`` patches at launch).
"""
from __future__ import annotations

import asyncio
import contextlib
import sys
from typing import Any

from negative_controls import seams
from runner_ref import codes
from runner_ref.errors import CommandError

#: the longest the next poll waits for the admits of the last poll's commands (wall seconds)
ADMIT_WAIT = 3.0
SEAMS = ("runner_ref.allowlists:require_profile", "runner_ref.poll_loop:PollLoop._take_answer",
         "runner_ref.poll_loop:PollLoop._admit_gate", "runner_ref.poll_loop:PollLoop._deliver")


def _profile_required(original: Any) -> Any:
    def require_profile(profile: object, allowed: Any) -> str:
        if profile is None:
            raise CommandError.of(codes.PROFILE_FORBIDDEN)
        return str(original(profile, allowed))
    return require_profile


def _admitted(self: Any) -> dict[str, asyncio.Event]:
    waits: dict[str, asyncio.Event] | None = getattr(self, "_late_admits", None)
    if waits is None:
        waits = {}
        self._late_admits = waits
    return waits


def _mark(self: Any, cid: object) -> None:
    ev = _admitted(self).pop(cid, None) if isinstance(cid, str) else None
    if ev is not None:
        ev.set()


def _take_answer_late(original: Any) -> Any:
    async def _take_answer(self: Any, body: dict[str, Any], reset: bool) -> None:
        fresh = [c["id"] for c in body.get("commands", [])
                 if isinstance(c, dict) and isinstance(c.get("id"), str) and c["id"] not in self._handling]
        events = [_admitted(self).setdefault(cid, asyncio.Event()) for cid in fresh]
        await original(self, body, reset)
        if events:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.gather(*(e.wait() for e in events)), ADMIT_WAIT)
    return _take_answer


def _admit_marks(original: Any) -> Any:
    async def _admit_gate(self: Any, cmd: dict[str, Any], epoch: str) -> bool:
        try:
            return bool(await original(self, cmd, epoch))
        finally:
            _mark(self, cmd.get("id"))
    return _admit_gate


def _deliver_marks(original: Any) -> Any:
    async def _deliver(self: Any, cmd: dict[str, Any], epoch: str) -> None:
        try:
            await original(self, cmd, epoch)
        finally:
            _mark(self, cmd.get("id"))  # answered without an admit (ledger, deadline, refusal)
    return _deliver


def apply() -> list[seams.Applied]:
    return [seams.apply(SEAMS[0], _profile_required, rebind=True),
            seams.apply(SEAMS[1], _take_answer_late), seams.apply(SEAMS[2], _admit_marks),
            seams.apply(SEAMS[3], _deliver_marks)]


def main(argv: list[str] | None = None) -> int:
    apply()
    from runner_ref.__main__ import main as runner_main
    return runner_main(sys.argv[1:] if argv is None else argv)


if __name__ == "__main__":
    sys.exit(main())
