"""A violation as text: the sentence, the witness lines with their seqs, the seed and the replay.

    INV-1 violated: at most one Hermes effect per command id
      command c1 executed twice in Hermes
      #3  control-plane deliver  command=c1 op=http epoch=e1 instance=i1
      #9  hermes        effect   command=c1 op=file.read
      #14 hermes        effect   command=c1 op=file.read
      steps:
        state = Machine(); state.enqueue_http(); state.deliver_twice()
      seed: 1234
      replay: pytest conformance -k dedupe --hypothesis-seed=1234
"""

from __future__ import annotations

from collections.abc import Iterable

from .facts import Fact
from .invariants import Violation

_IDS = ("command_id", "connection_id", "session_id", "lease_id", "call_id", "op", "method",
        "outcome", "code", "reason", "epoch", "instance", "profile")
_SHORT = {"command_id": "command", "connection_id": "channel", "session_id": "session",
          "lease_id": "lease", "call_id": "call"}


def fact_line(f: Fact) -> str:
    """``#seq source kind ids…`` for one fact."""
    parts = [f"#{f.seq}", f"{f.source:<13}", f"{f.kind:<11}"]
    for name in _IDS:
        value = getattr(f, name)
        if value is not None:
            parts.append(f"{_SHORT.get(name, name)}={value}")
    if f.profiles is not None:
        parts.append("profiles=" + ",".join(sorted(f.profiles)))
    if f.indeterminate:
        parts.append("INDETERMINATE")
    if f.raw:
        parts.append(f"({f.raw})")
    return " ".join(parts)


def render(violation: Violation, *, seed: int | str | None = None, replay: str | None = None,
           steps: str | None = None) -> str:
    """The violation as text; ``seed``, ``replay`` and the shrunk ``steps`` (as runnable code)
    come from the caller."""
    lines = [f"{violation.invariant_id} violated: {violation.sentence}"]
    if violation.note:
        lines.append(f"  {violation.note}")
    lines += ["  " + fact_line(f) for f in violation.witness]
    if steps:
        lines.append("  steps:")
        lines += ["    " + ln for ln in steps.splitlines()]
    if seed is not None:
        lines.append(f"  seed: {seed}")
    if replay:
        lines.append(f"  replay: {replay}")
    return "\n".join(lines)


def render_all(violations: Iterable[Violation], *, seed: int | str | None = None,
               replay: str | None = None, steps: str | None = None) -> str:
    """Several violations, one block each."""
    return "\n\n".join(render(v, seed=seed, replay=replay, steps=steps) for v in violations)
