"""A case's transcript as timeline rows: control plane ↔ runner ↔ Hermes, one row per item.

Rules:
- One row per transcript item, in the transcript's order (``seq``; the runner's output lines
  last). :data:`LANES` says, per item ``type``, which lane the item's text sits in and which pair
  of lanes its arrow joins: an exchange joins the runner and the control plane, a lifecycle fact
  sits on the control plane, a Hermes effect (or a real Hermes' model call) joins the runner and
  Hermes, an output line sits on the runner. An item of another type, or text from a foreign
  world, is one full-width row.
- A row is a *witness* row when its ``seq`` is named by a witness line or by the verdict's
  ``actual`` (``#41 …``, ``history#8[0]`` or ``"seq": 41``): those rows are highlighted.
- ``route`` is the exchange's route (None for the other rows); the report's route filter shows
  one route's rows (and hides the rest) on the page, client-side.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from typing import Any

#: the lanes, left to right (the timeline's columns)
LANE_ORDER = ("cp", "runner", "hermes")
WITNESS_SEQ = re.compile(r"#(\d+)\b|\"seq\":\s*(\d+)")


def _exchange(i: dict[str, Any]) -> str:
    answer = "dropped" if i.get("status") is None else f"{i.get('status')} {i.get('code') or ''}"
    fault = f" fault={i['fault']}" if i.get("fault") else ""
    cmd = f" {i['command_id']}" if i.get("command_id") else ""
    reset = " reset" if i.get("reset") else ""
    return f"{i.get('method')} {i.get('route')}{reset}{cmd} → {answer.strip()}{fault}"


def _lifecycle(i: dict[str, Any]) -> str:
    why = f" ({i['reason']})" if i.get("reason") else ""
    return f"{i.get('kind')}{' ' + i['command_id'] if i.get('command_id') else ''}{why}"


def _effect(i: dict[str, Any]) -> str:
    cause = i.get("cause") or {}
    by = " ".join(str(cause[k]) for k in ("method", "path") if cause.get(k))
    return f"{i.get('kind')}{' ← ' + by if by else ''}"


def _output(i: dict[str, Any]) -> str:
    return f"[run {i.get('run')} {i.get('stream')}] {i.get('text')}"


def _model(i: dict[str, Any]) -> str:
    return f"model call {i.get('n')}{' rule ' + str(i['rule']) if i.get('rule') else ''}"


#: type → (the lane its text sits in, the lanes its arrow joins or None, its one-line text)
LANES: dict[str, tuple[str, tuple[str, str] | None, Callable[[dict[str, Any]], str]]] = {
    "exchange": ("runner", ("cp", "runner"), _exchange),
    "lifecycle": ("cp", None, _lifecycle),
    "effect": ("hermes", ("runner", "hermes"), _effect),
    "model": ("hermes", ("runner", "hermes"), _model),
    "output": ("runner", None, _output),
}


def witness_seqs(witness: Iterable[str]) -> set[int]:
    return {int(a or b) for line in witness for a, b in WITNESS_SEQ.findall(line)}


def cells(lane: str | None, arrow: tuple[str, str] | None, text: str) -> list[dict[str, Any]]:
    """The row's cells over :data:`LANE_ORDER`: an arrow's text spans its two lanes, a lane's
    text sits in its lane, a row of no lane spans all three."""
    if lane is None:
        return [{"span": len(LANE_ORDER), "text": text, "arrow": False}]
    first, width = (LANE_ORDER.index(min(arrow, key=LANE_ORDER.index)), 2) if arrow else (
        LANE_ORDER.index(lane), 1)
    out = [{"span": 1, "text": "", "arrow": False} for _ in range(first)]
    out.append({"span": width, "text": text, "arrow": arrow is not None})
    out += [{"span": 1, "text": "", "arrow": False}
            for _ in range(len(LANE_ORDER) - first - width)]
    return out


def rows(transcript: Iterable[Any], witness: Iterable[str] = ()) -> list[dict[str, Any]]:
    """The timeline rows of one case (see the module rules)."""
    named = witness_seqs(witness)
    out: list[dict[str, Any]] = []
    for item in transcript:
        if not isinstance(item, dict) or item.get("type") not in LANES:
            text = item if isinstance(item, str) else json.dumps(item, default=str)
            out.append({"seq": None, "type": "text", "cells": cells(None, None, text),
                        "route": None, "witness": False, "item": item})
            continue
        lane, arrow, render = LANES[item["type"]]
        seq = item.get("seq")
        out.append({"seq": seq, "type": item["type"], "cells": cells(lane, arrow, render(item)),
                    "witness": seq in named,
                    "route": item.get("route") if item["type"] == "exchange" else None,
                    "item": item})
    return out


def routes(timeline: Iterable[dict[str, Any]]) -> list[str]:
    """The routes of a timeline's exchanges, in first-seen order (the filter's choices)."""
    return list(dict.fromkeys(r["route"] for r in timeline if r["route"]))
