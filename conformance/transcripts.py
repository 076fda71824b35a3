"""Which case results keep their transcript whole in ``results.json`` (``--transcripts``).

Rules:
- A transcript item is a JSON object whose ``type`` names its ``$defs`` entry in the results
  schema (``exchange``, ``lifecycle``, ``effect``, ``output``, ``model``), or a string (a
  foreign ``--conformance-world`` that yields text). It is redacted before it gets here.
- :data:`POLICIES` maps the mode to the statuses whose transcript is kept whole: ``failing``
  (the default) keeps every status but the passing ones of :data:`PASSING`, so a new status
  (``error``, ``timeout``…) keeps its evidence without a change here; ``all`` keeps every one;
  ``none`` keeps none.
- A transcript not kept leaves its digest (:func:`digest`): the item count and the sha256 of its
  canonical JSON (what the case saw, how much, identified; ids, tokens and times differ from run
  to run, so two runs' digests of one passing case differ too).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any

#: statuses whose transcript ``failing`` drops (the evidence of a case that needs none)
PASSING = frozenset({"pass", "not-applicable"})
POLICIES: dict[str, Callable[[str], bool]] = {
    "failing": lambda status: status not in PASSING,
    "all": lambda status: True,
    "none": lambda status: False,
}
DEFAULT = "failing"


def digest(transcript: list[Any]) -> dict[str, Any]:
    """``{"items": N, "sha256": …}`` of a transcript (canonical JSON: sorted keys, no spaces)."""
    blob = json.dumps(transcript, sort_keys=True, separators=(",", ":"), default=str)
    return {"items": len(transcript), "sha256": hashlib.sha256(blob.encode()).hexdigest()}


def keep(mode: str, status: str, transcript: list[Any]) -> tuple[list[Any], dict[str, Any] | None]:
    """(the transcript to write, its digest when it was dropped, else None)."""
    if POLICIES[mode](status) or not transcript:
        return transcript, None
    return [], digest(transcript)
