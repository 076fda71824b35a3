"""Witness lines: the one format in which a failing case quotes its evidence (sans-IO).

A *witness* is the few recorded items that prove a verdict: control-plane exchanges, Hermes
effects, lifecycle facts, checker facts; and, where nothing recorded shows it, a frame on a
channel, a runner output line or a harness note. Every one is ONE line of ONE shape::

    #<seq> <source> <what>[ → <answer>] [name=value …] [flag …] [label=<json> …]

    #41 runner→cp POST result → 409 runner_epoch_stale command=c-7 epoch=e-1 instance=i-2 server_epoch=e-2 req={"id":"c-7","result":{}} resp={"error":"stale epoch","code":"runner_epoch_stale"}
    #44 hermes file.read cause=http:GET:/api/files/download conn=127.0.0.1:5170 detail={"path":"/tmp/a"}
    #45 cp delivered command=c-7 detail={"exchange_seq":41}
    #47 harness kill command=c-7 reason=after_started instance=i-2
    #- runner stderr cannot start: runnerId missing

Rules:
- A line starts with the item's seq on the run's shared sequence, ``#41`` (the report's timeline
  highlights the item it names); an item the sequence does not stamp (a runner output line, a
  frame on a channel, a request a proxy saw, a harness note) starts with ``#-``.
- ``source`` says who acted: ``runner→cp`` (an exchange: the runner's request to the control
  plane and its answer, on one line), ``cp`` (a lifecycle fact; a checker fact of the control
  plane), ``hermes`` (an effect), ``harness`` (a harness step or note), ``runner`` (an output
  line), ``channel`` (a frame the runner forwarded), ``runner→hermes`` (a request a proxy saw).
- ``what`` is an exchange's ``METHOD route`` with `` → status code`` (`` → no answer`` when none
  was made), or an effect's, a fact's or a frame's kind.
- Then the join ids as ``name=value`` (:data:`EXCHANGE_IDS`, :data:`EFFECT_IDS`,
  :data:`LIFECYCLE_IDS`, :data:`FACT_IDS`; ``server_epoch=`` when the control plane's epoch is
  not the request's; ``runner=`` only when it is not the world's own runner), flags as a bare word (``reset``,
  ``INDETERMINATE``), then bodies as compact JSON with a label (``req=``, ``resp=``,
  ``detail=``, ``payload=``), each cut to :data:`BODY` characters; the whole line is cut to
  :data:`WIDTH`. A cut ends in ``…``. In ids and bodies a lowercase UUID is shortened to its
  first 8 hex digits and ``…`` (``e836922a…``; the transcript keeps it whole, and an id that is
  not a lowercase UUID is shown as sent).
- A line holds nothing its item does not: no header but the epoch and instance ones, no value
  the harness knows on the side, so it carries no secret its item did not. Items of
  ``world.transcript()`` are redacted already; a renderer given another item redacts each text
  with its ``redact`` *before* cutting it (a secret cut in half would escape the plugin's
  redaction, which runs once more on every witness line).
- :func:`witness` selects from ``world.transcript()``: the items after ``after_seq`` that mention
  one of ``needles`` (any id text), are on one of ``routes`` or (``effects``) are Hermes
  effects, all items when it is given none of the three; the last ``last`` of them.
  :func:`lines_of` renders items a case holds (exchanges of the history, effects, facts), redacted
  by the world.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol

#: a body (JSON) is cut to this many characters
BODY = 160
#: a whole line is cut to this many characters
WIDTH = 480
#: the seq of an item the shared sequence does not stamp
NO_SEQ = "-"
ELLIPSIS = "…"
_IS_LINE = re.compile(r"#(\d+|-) ")
UUID = re.compile(r"\b([0-9a-f]{8})-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b")

Redact = Callable[[str], str]

#: exchange field → its name on the line, in line order (``reset`` is a flag, bodies come last)
EXCHANGE_IDS: tuple[tuple[str, str], ...] = (
    ("command_id", "command"), ("connection_id", "channel"), ("lease_id", "lease"),
    ("call_id", "call"), ("request_epoch", "epoch"), ("instance", "instance"),
    ("fault", "fault"))
#: effect field → its name on the line
EFFECT_IDS: tuple[tuple[str, str], ...] = (
    ("session_id", "session"), ("stored_session_id", "stored"), ("socket_id", "socket"),
    ("profile", "profile"))
#: lifecycle-fact field → its name on the line
LIFECYCLE_IDS: tuple[tuple[str, str], ...] = (
    ("command_id", "command"), ("connection_id", "channel"), ("lease_id", "lease"),
    ("reason", "reason"))
#: checker-fact field → its name on the line
FACT_IDS: tuple[tuple[str, str], ...] = (
    ("command_id", "command"), ("connection_id", "channel"), ("session_id", "session"),
    ("lease_id", "lease"), ("call_id", "call"), ("op", "op"), ("method", "method"),
    ("outcome", "outcome"), ("code", "code"), ("reason", "reason"), ("epoch", "epoch"),
    ("instance", "instance"), ("profile", "profile"))
#: a checker fact's source as a line's source
SOURCES = {"control-plane": "cp", "hermes": "hermes", "harness": "harness"}


class Transcribed(Protocol):
    """What :func:`witness` reads of a world: its redacted transcript."""

    def transcript(self) -> list[dict[str, Any]]: ...


def _plain(text: str) -> str:
    return text


def cut(text: str, width: int) -> str:
    """``text`` when it fits in ``width`` characters, else its start ending in ``…``."""
    return text if len(text) <= width else text[: max(width - 1, 0)] + ELLIPSIS


def short_ids(text: str) -> str:
    """Every lowercase UUID of ``text`` as its first 8 hex digits and ``…``."""
    return UUID.sub(lambda m: m.group(1) + ELLIPSIS, text)


def compact(value: Any) -> str:
    """``value`` as compact JSON (text as it is)."""
    if isinstance(value, str):
        return value
    return json.dumps(value, default=str, separators=(",", ":"), ensure_ascii=False)


def fields(item: Any) -> Mapping[str, Any]:
    """The fields of a transcript item (a dict), a dataclass or any object, as a mapping."""
    if isinstance(item, Mapping):
        return item
    if dataclasses.is_dataclass(item) and not isinstance(item, type):
        return {f.name: getattr(item, f.name) for f in dataclasses.fields(item)}
    return dict(vars(item)) if hasattr(item, "__dict__") else {}


def line(seq: Any, source: str, what: str, *, answer: str | None = None,
         ids: Iterable[tuple[str, Any]] = (), flags: Iterable[str] = (),
         bodies: Iterable[tuple[str, Any]] = (), redact: Redact = _plain) -> str:
    """The one shape: ``#seq source what[ → answer] name=value… flag… label=json…``; ids and
    bodies whose value is None (or an empty body) are left out."""
    parts = [f"#{seq if seq is not None else NO_SEQ}", source, what]
    if answer is not None:
        parts += ["→", answer]
    parts += [f"{name}={cut(short_ids(redact(str(value))), BODY)}" for name, value in ids
              if value is not None and value != ""]
    parts += list(flags)
    parts += [f"{label}={cut(short_ids(redact(compact(body))), BODY)}" for label, body in bodies
              if body is not None and body not in ({}, [], "")]
    return cut(" ".join(p for p in parts if p), WIDTH)


def _ids(f: Mapping[str, Any], names: Sequence[tuple[str, str]]) -> list[tuple[str, Any]]:
    return [(name, f.get(key)) for key, name in names]


def _runner(f: Mapping[str, Any], home_runner: str | None) -> list[tuple[str, Any]]:
    rid = f.get("runner_id")
    return [("runner", rid)] if rid and rid != home_runner else []


def exchange_line(ex: Any, *, home_runner: str | None = None, redact: Redact = _plain) -> str:
    """A control-plane exchange (a history entry or its transcript item)."""
    f = fields(ex)
    status = f.get("status")
    answer = "no answer" if status is None else f"{status} {f.get('code') or ''}".strip()
    ids = _ids(f, EXCHANGE_IDS)
    server = f.get("epoch")
    if server is not None and server != f.get("request_epoch"):
        ids.append(("server_epoch", server))
    return line(f.get("seq"), "runner→cp", f"{f.get('method')} {f.get('route')}", answer=answer,
                ids=ids + _runner(f, home_runner), flags=["reset"] if f.get("reset") else [],
                bodies=[("req", f.get("request_body")), ("resp", f.get("response_body"))],
                redact=redact)


def _cause(cause: Any) -> str | None:
    c = fields(cause) if cause is not None else {}
    parts = [str(c[k]) for k in ("transport", "method", "path") if c.get(k)]
    return ":".join(parts) or None


def effect_line(effect: Any, *, redact: Redact = _plain) -> str:
    """A Hermes effect (an effect-log entry or its transcript item)."""
    f = fields(effect)
    return line(f.get("seq"), "hermes", str(f.get("kind")),
                ids=[*_ids(f, EFFECT_IDS), ("cause", _cause(f.get("cause"))),
                     ("conn", fields(f.get("cause") or {}).get("connection"))],
                bodies=[("detail", f.get("detail"))], redact=redact)


def lifecycle_line(fact: Any, *, home_runner: str | None = None, redact: Redact = _plain) -> str:
    """A fact of the control plane's lifecycle log (an entry or its transcript item)."""
    f = fields(fact)
    return line(f.get("seq"), "cp", str(f.get("kind")),
                ids=_ids(f, LIFECYCLE_IDS) + _runner(f, home_runner),
                bodies=[("detail", f.get("detail"))], redact=redact)


def fact_line(fact: Any, *, redact: Redact = _plain) -> str:
    """A checker fact (:class:`conformance.checks.facts.Fact`): its join ids, the allowed
    profiles, ``INDETERMINATE``, and ``from=`` the record it was made of (``history#12``)."""
    f = fields(fact)
    ids = _ids(f, FACT_IDS)
    if f.get("profiles") is not None:
        ids.append(("profiles", ",".join(sorted(f["profiles"]))))
    ids.append(("from", f.get("raw")))
    source = str(f.get("source"))
    return line(f.get("seq"), SOURCES.get(source, source), str(f.get("kind")), ids=ids,
                flags=["INDETERMINATE"] if f.get("indeterminate") else [], redact=redact)


def frame_line(frame: Mapping[str, Any], *, redact: Redact = _plain) -> str:
    """A frame the runner forwarded on a channel (``{type, session_id, payload}``; no seq)."""
    return line(None, "channel", str(frame.get("type")), ids=[("session", frame.get("session_id"))],
                bodies=[("payload", frame.get("payload"))], redact=redact)


def frame_lines(frames: Iterable[Mapping[str, Any]], *, redact: Redact = _plain) -> list[str]:
    """:func:`frame_line` of each frame, in order."""
    return [frame_line(f, redact=redact) for f in frames]


def output_line(text: str, *, stream: str = "stderr", run: int | None = None,
                redact: Redact = _plain) -> str:
    """One line the runner printed (no seq): ``#- runner stderr <text>``."""
    where = stream if run is None else f"{stream} run={run}"
    return cut(f"#{NO_SEQ} runner {where} {redact(text)}".rstrip(), WIDTH)


def output_lines(text: str, *, stream: str = "stderr", last: int = 3,
                 redact: Redact = _plain) -> list[str]:
    """The last ``last`` non-empty lines of ``text`` the runner printed on ``stream``."""
    kept = [ln for ln in text.splitlines() if ln.strip()][-last:] if last > 0 else []
    return [output_line(ln, stream=stream, redact=redact) for ln in kept]


def note_line(source: str, text: str, *, redact: Redact = _plain) -> str:
    """What no record holds (a request a proxy saw, a harness note): ``#- source text``."""
    return cut(f"#{NO_SEQ} {source} {redact(text)}", WIDTH)


def text_lines(text: str, *, source: str = "harness", redact: Redact = _plain) -> list[str]:
    """A text of several lines (a rendered violation, a report) as witness lines: a line that is
    one already (``#41 …``, ``#- …``) is kept, any other non-empty line becomes a note of
    ``source``."""
    out = []
    for raw in text.splitlines():
        ln = raw.strip()
        if ln:
            out.append(cut(redact(ln), WIDTH) if _IS_LINE.match(ln) else
                       note_line(source, ln, redact=redact))
    return out


def item_line(item: Mapping[str, Any], *, home_runner: str | None = None,
              redact: Redact = _plain) -> str:
    """A transcript item (``world.transcript()``/``world.evidence()``), by its ``type``."""
    kind = item.get("type")
    if kind == "exchange":
        return exchange_line(item, home_runner=home_runner, redact=redact)
    if kind == "effect":
        return effect_line(item, redact=redact)
    if kind == "lifecycle":
        return lifecycle_line(item, home_runner=home_runner, redact=redact)
    if kind == "output":
        return output_line(str(item.get("text", "")), stream=str(item.get("stream")),
                           run=item.get("run"), redact=redact)
    rest = {k: v for k, v in item.items() if k not in ("type", "seq")}
    return line(item.get("seq"), str(kind), "item", bodies=[("data", rest)], redact=redact)


def any_line(thing: Any, *, home_runner: str | None = None, redact: Redact = _plain) -> str:
    """A transcript item, history exchange, effect, lifecycle fact or checker fact, told apart
    by the fields it has."""
    f = fields(thing)
    if "type" in f and isinstance(thing, Mapping):
        return item_line(thing, home_runner=home_runner, redact=redact)
    if "route" in f:
        return exchange_line(thing, home_runner=home_runner, redact=redact)
    if "source" in f:
        return fact_line(thing, redact=redact)
    if "socket_id" in f:
        return effect_line(thing, redact=redact)
    if "runner_id" in f and "kind" in f:
        return lifecycle_line(thing, home_runner=home_runner, redact=redact)
    return note_line("harness", compact(thing), redact=redact)


# -- selection ----------------------------------------------------------------------------------

def _home(world: Any) -> str | None:
    rid = getattr(world, "runner_id", None)
    return rid if isinstance(rid, str) else None


def selects(item: Mapping[str, Any], needles: Sequence[str], routes: frozenset[str],
            effects: bool) -> bool:
    """The selection rule of :func:`witness` for one transcript item."""
    if not needles and not routes and not effects:
        return True
    if effects and item.get("type") == "effect":
        return True
    if routes and item.get("route") in routes:
        return True
    if not needles:
        return False
    blob = json.dumps(item, default=str)
    return any(n in blob for n in needles)


class Deferred(Sequence[str]):
    """Witness lines made when first read. ``expect(cond, …, witness=witness(world, …))`` is
    evaluated on every check, and a passing check never reads its witness; a failing one is
    read at once (``CaseFailed`` keeps the lines), so the lines are those of that moment."""

    def __init__(self, make: Callable[[], list[str]]) -> None:
        self._make: Callable[[], list[str]] | None = make
        self._lines: list[str] = []

    def _get(self) -> list[str]:
        if self._make is not None:
            self._lines, self._make = self._make(), None
        return self._lines

    def __getitem__(self, i: Any) -> Any:
        return self._get()[i]

    def __len__(self) -> int:
        return len(self._get())

    def __add__(self, other: Iterable[str]) -> list[str]:
        return [*self._get(), *other]

    def __radd__(self, other: Iterable[str]) -> list[str]:
        return [*other, *self._get()]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sequence) and list(self._get()) == list(other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return repr(self._get())


def witness(world: Transcribed, *needles: str | None, routes: Iterable[str] = (),
            effects: bool = False, after_seq: int = 0, last: int = 12) -> Deferred:
    """The last ``last`` lines of the world's (redacted) transcript after ``after_seq`` that
    mention one of ``needles``, are on one of ``routes`` or (``effects``) are Hermes effects;
    every item when none of the three is given. Made when first read (:class:`Deferred`)."""
    keys = [n for n in needles if n]
    wanted = frozenset(routes)

    def make() -> list[str]:
        chosen = [item for item in world.transcript()
                  if (item.get("seq") or 0) > after_seq and selects(item, keys, wanted, effects)]
        home = _home(world)
        return [item_line(item, home_runner=home) for item in chosen[-last:]] if last > 0 else []

    return Deferred(make)


def lines_of(world: Any, things: Iterable[Any]) -> list[str]:
    """Lines of items a case holds (history exchanges, effects, lifecycle or checker facts),
    each text redacted by ``world.redact`` before it is cut."""
    redact = getattr(world, "redact", None)
    home = _home(world)
    return [any_line(t, home_runner=home, redact=redact if callable(redact) else _plain)
            for t in things]


__all__ = ["BODY", "WIDTH", "Deferred", "any_line", "cut", "effect_line", "exchange_line", "fact_line",
           "frame_line", "frame_lines", "item_line", "lifecycle_line", "line", "lines_of",
           "note_line", "output_line", "output_lines", "short_ids", "text_lines", "witness"]
