"""The one witness format (``conformance.witness``): each kind of item as one line, the cuts, the
redaction before a cut, the selection filters, and docs/certification.md's failing case printed
exactly as the helper prints it."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from conformance.catalogue import ROWS
from conformance.checks.facts import fact
from conformance.report.timeline import witness_seqs
from conformance.witness import (
    BODY,
    WIDTH,
    any_line,
    effect_line,
    exchange_line,
    fact_line,
    frame_line,
    item_line,
    lifecycle_line,
    lines_of,
    note_line,
    output_lines,
    short_ids,
    text_lines,
    witness,
)
from fake_server.history import Exchange
from fake_server.lifecycle_log import Fact as LifecycleFact
from fixtures.hermes.effects import Cause, Effect

ROOT = Path(__file__).resolve().parents[2]
#: every witness line starts so: a seq on the shared sequence, or ``#-`` for an item without one
SHAPE = re.compile(r"^#(\d+|-) \S+ \S")

CID = "23a7e98f-5f4e-4c1a-9d57-0d2c4a1e7b10"
EPOCH = "e82887b7-0c3d-4f4e-8a55-2d1f9e6b7a01:44866110-7e2a-4b1c-9f0d-6c5b4a392817"
INSTANCE = "a032c846-91b7-4d2e-b3f0-5e8c7d6a1f29"
RUNNER = "0b7e4a52-3c1d-4e8f-9a6b-7d2c1e0f5a43"


def exchange(seq: int, route: str, *, status: int | None = 200, code: str | None = None,
             request: Any = None, response: Any = None, **kw: Any) -> Exchange:
    ex = Exchange(seq=seq, time=float(seq), route=route, method="GET" if route == "poll" else "POST",
                  runner_id=kw.pop("runner_id", RUNNER), instance=INSTANCE,
                  request_epoch=kw.pop("request_epoch", EPOCH), reset=kw.pop("reset", False),
                  request_digest=None, request_body=None, epoch=kw.pop("epoch", EPOCH),
                  status=status, code=code, response_body=response, **kw)
    ex.set_request_body(request)
    return ex


def file_read(seq: int) -> Effect:
    return Effect(seq=seq, kind="file.read", session_id=None, stored_session_id=None, profile=None,
                  socket_id=None, time=float(seq),
                  detail={"path": "/srv/artifacts/receipt.txt", "status": 200, "bytes": 14},
                  cause=Cause("http", "GET", "/api/files/download"))


def failing_dedupe() -> list[Any]:
    """DED-002 against a runner whose claim upserts: the replay is admitted and read again."""
    admit = {"id": CID}
    result = {"id": CID, "result": {"status": 200, "body": "cmVjZWlwdC1ieXRlcwo="}}
    return [exchange(9, "admit", request=admit, response={"allowed": True}), file_read(12),
            exchange(13, "result", request=result, response={"ok": True}),
            exchange(20, "admit", request=admit, response={"allowed": True}), file_read(23)]


class World:
    """What the selection helpers read of a world: transcript, redact, runner id."""

    def __init__(self, items: list[Any], secret: str = "s3cr3t-t0ken-value") -> None:
        self.items, self.secret, self.runner_id = items, secret, RUNNER

    def redact(self, text: str) -> str:
        return text.replace(self.secret, "«redacted»")

    def transcript(self) -> list[dict[str, Any]]:
        out = []
        for item in self.items:
            kind = "exchange" if isinstance(item, Exchange) else "effect"
            fields = vars(item) if isinstance(item, Exchange) else item.to_json()
            out.append({"type": kind, **fields})
        return out


# -- each item type --------------------------------------------------------------------------

def test_an_exchange_is_one_line_seq_first_with_answer_ids_and_bodies() -> None:
    ex = exchange(41, "result", status=409, code="runner_epoch_stale", request={"id": "c-7"},
                  response={"error": "stale"}, request_epoch="e-1", epoch="e-2", reset=True,
                  fault="slow")
    assert exchange_line(ex, home_runner=RUNNER) == (
        "#41 runner→cp POST result → 409 runner_epoch_stale command=c-7 epoch=e-1 "
        "instance=a032c846… fault=slow server_epoch=e-2 reset "
        'req={"id":"c-7"} resp={"error":"stale"}')


def test_an_exchange_without_answer_and_of_another_runner() -> None:
    ex = exchange(7, "poll", status=None, runner_id="other", request_epoch=None, epoch=None)
    assert exchange_line(ex, home_runner=RUNNER) == (
        "#7 runner→cp GET poll → no answer instance=a032c846… runner=other")
    assert "runner=" not in exchange_line(exchange(8, "poll"), home_runner=RUNNER)


def test_an_effect_a_lifecycle_fact_and_a_checker_fact() -> None:
    assert effect_line(file_read(12)) == (
        "#12 hermes file.read cause=http:GET:/api/files/download "
        'detail={"path":"/srv/artifacts/receipt.txt","status":200,"bytes":14}')
    life = LifecycleFact(43, 1.0, "delivered", RUNNER, command_id="c-7",
                         detail={"exchange_seq": 41})
    assert lifecycle_line(life, home_runner=RUNNER) == (
        '#43 cp delivered command=c-7 detail={"exchange_seq":41}')
    checker = fact(3, "deliver", command_id="c1", op="http", epoch="e1", raw="history#2[0]")
    assert fact_line(checker) == "#3 cp deliver command=c1 op=http epoch=e1 from=history#2[0]"
    maybe = fact(9, "effect", command_id="c1", indeterminate=True,
                 profiles=frozenset({"b", "a"}))
    assert fact_line(maybe) == "#9 hermes effect command=c1 profiles=a,b INDETERMINATE"


def test_the_same_item_as_object_and_as_transcript_item_reads_the_same() -> None:
    world = World(failing_dedupe())
    assert [item_line(i, home_runner=RUNNER) for i in world.transcript()] == [
        any_line(i, home_runner=RUNNER) for i in world.items]


def test_items_without_a_seq_start_with_a_dash() -> None:
    assert frame_line({"type": "message.complete", "session_id": "s1",
                       "payload": {"text": "PONG"}}) == (
        '#- channel message.complete session=s1 payload={"text":"PONG"}')
    assert output_lines("one\n\ntwo\nthree\n", last=2) == [
        "#- runner stderr two", "#- runner stderr three"]
    assert note_line("runner→hermes", "GET /api/profiles") == "#- runner→hermes GET /api/profiles"
    assert item_line({"type": "output", "run": 2, "stream": "stdout", "text": "ok"}) == (
        "#- runner stdout run=2 ok")


def test_a_rendered_violation_keeps_its_lines_and_notes_the_rest() -> None:
    text = "INV-1 violated: at most one\n  #3 cp deliver command=c1\n\n  seed: 7"
    assert text_lines(text) == ["#- harness INV-1 violated: at most one",
                                "#3 cp deliver command=c1", "#- harness seed: 7"]


def test_every_renderer_keeps_the_shape_and_the_timeline_finds_the_seq() -> None:
    lines = [*lines_of(World([]), failing_dedupe()), *output_lines("x"), note_line("harness", "n"),
             fact_line(fact(5, "kill", reason="after_started"))]
    assert all(SHAPE.match(ln) for ln in lines), lines
    assert witness_seqs(lines) == {5, 9, 12, 13, 20, 23}


# -- cuts and redaction ----------------------------------------------------------------------

def test_a_body_is_cut_to_its_bound_and_a_line_to_the_width() -> None:
    ex = exchange(5, "result", request={"id": "c-1", "blob": "y" * 1000}, response={"ok": True})
    text = exchange_line(ex)
    req = re.search(r'req=(\S+)', text)
    assert req is not None and len(req.group(1)) == BODY and req.group(1).endswith("…")
    assert text.endswith('resp={"ok":true}')
    many = exchange(6, "result", request={"id": "c" * 300, "leaseId": "l" * 300},
                    response={"ok": "k" * 300}, fault="z" * 300)
    assert len(exchange_line(many)) == WIDTH and exchange_line(many).endswith("…")


def test_redaction_comes_before_the_cut() -> None:
    secret = "s3cr3t-t0ken-value"
    pad = "p" * (BODY - 20)  # the secret straddles the body's cut
    ex = exchange(5, "result", request={"a": pad + secret}, response=None)
    world = World([ex], secret)
    (line,) = lines_of(world, [ex])
    assert secret[:6] not in line and "«redact" in line
    assert secret[:6] in exchange_line(ex)  # what an unredacted render would have leaked


def test_lowercase_uuids_are_shortened_others_kept() -> None:
    assert short_ids(f"{CID} {CID.upper()}") == f"23a7e98f… {CID.upper()}"
    assert short_ids(EPOCH) == "e82887b7…:44866110…"


# -- selection -------------------------------------------------------------------------------

def test_selection_by_needle_route_effects_after_seq_and_last() -> None:
    poll = exchange(2, "poll", request=None, response={"commands": []})
    world = World([poll, *failing_dedupe()])
    every = witness(world)
    assert [ln.split()[0] for ln in every] == ["#2", "#9", "#12", "#13", "#20", "#23"]
    assert [ln.split()[0] for ln in witness(world, CID)] == ["#9", "#13", "#20"]
    assert [ln.split()[0] for ln in witness(world, CID, effects=True)] == [
        "#9", "#12", "#13", "#20", "#23"]
    assert [ln.split()[0] for ln in witness(world, routes=("poll",))] == ["#2"]
    assert [ln.split()[0] for ln in witness(world, None, "nothing-matches")] == []
    assert [ln.split()[0] for ln in witness(world, CID, after_seq=12, last=1)] == ["#20"]
    assert witness(world, last=0) == []


def test_selection_reads_the_transcript_lines_of_the_world_runner() -> None:
    assert all("runner=" not in ln for ln in witness(World(failing_dedupe())))


# -- docs/certification.md -------------------------------------------------------------------

def _doc_example() -> list[str]:
    text = (ROOT / "docs" / "certification.md").read_text(encoding="utf-8")
    block = text.split("A failing case reads like this", 1)[1].split("```", 2)[1]
    return block.strip("\n").splitlines()


def test_the_docs_failing_case_shows_exactly_what_the_helper_prints() -> None:
    example = _doc_example()
    at = example.index("witness:")
    assert example[at + 1:] == ["  " + ln for ln in lines_of(World([]), failing_dedupe())]


def test_the_docs_failing_case_heads_with_its_catalogue_row_and_states_the_bounds() -> None:
    row = next(r for r in ROWS if r.id == "DED-002")
    example = _doc_example()
    assert example[0] == f"{row.id} [{row.level}] {row.requirement}"
    assert example[1].startswith("expected: ") and example[2].startswith("actual:   ")
    doc = " ".join((ROOT / "docs" / "certification.md").read_text(encoding="utf-8").split())
    assert f"cut to {BODY} characters, a line to {WIDTH}" in doc


def test_a_witness_is_made_only_when_read() -> None:
    """A passing ``expect`` never reads its witness: the transcript is not walked for it."""
    from conformance import witness as wl

    reads: list[int] = []

    class World:
        def transcript(self) -> list[dict[str, object]]:
            reads.append(1)
            return [{"type": "exchange", "seq": 3, "route": "poll", "method": "GET",
                     "status": 200}]

    lines = wl.witness(World(), routes=("poll",))
    assert reads == []
    assert len(lines) == 1 and lines[0].startswith("#3 ") and reads == [1]
    assert list(lines) == lines and lines + ["x"] == [lines[0], "x"] and reads == [1]
