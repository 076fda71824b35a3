"""A violation as text: the sentence, the witness lines with their seqs, the seed and the replay.

    INV-1 violated: at most one Hermes effect per command id
      command c1 executed twice in Hermes
      #3 cp deliver command=c1 op=http epoch=e1 instance=i1 from=history#2[0]
      #9 hermes effect command=c1 op=file.read from=effects#9
      #14 hermes effect command=c1 op=file.read from=effects#14
      steps:
        state = Machine(); state.enqueue_http(); state.deliver_twice()
      seed: 1234
      replay: pytest conformance -k dedupe --hypothesis-seed=1234

Rules: a witness fact is one line of :func:`conformance.witness.fact_line` (the one witness
format); this module adds only the sentence, the note, the steps, the seed and the replay.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..witness import fact_line
from .invariants import Violation


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
