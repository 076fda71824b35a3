"""The history's optional cap (a ring buffer for long benchmark runs); default unbounded."""

from __future__ import annotations

import pytest

from fake_server import ControlPlane, History, ManualClock

from .fake_server_client import Client


def _fill(h: History, n: int) -> None:
    for i in range(n):
        h.begin(time=float(i), route="poll", method="GET", runner_id="r", instance=None,
                request_epoch=None, reset=False, request_digest=None, request_body=None)


def test_unbounded_by_default() -> None:
    h = History()
    _fill(h, 1000)
    assert len(h) == 1000 and h.dropped == 0 and h.max_entries is None
    assert [e.seq for e in h][:3] == [1, 2, 3] and h[-1].seq == 1000


def test_ring_buffer_keeps_the_newest_and_seq_never_repeats() -> None:
    h = History(max_entries=3)
    _fill(h, 5)
    assert [e.seq for e in h] == [3, 4, 5] and len(h) == 3 and h.dropped == 2
    assert h[0].seq == 3 and h[-1].seq == 5 and [e.seq for e in h[1:]] == [4, 5]
    assert [e.seq for e in h.entries] == [3, 4, 5]
    assert [e.seq for e in h.since(3)] == [4, 5] and h.since(5) == [] and h.last_seq == 5
    h.clear()
    _fill(h, 1)
    assert [e.seq for e in h] == [6]


@pytest.mark.parametrize("bad", [0, -1])
def test_cap_must_be_positive(bad: int) -> None:
    with pytest.raises(ValueError):
        History(max_entries=bad)


async def test_control_plane_history_cap(client: Client) -> None:
    async with ControlPlane(clock=ManualClock(), history_max_entries=2) as plane:
        reg = await plane.register_runner()
        c = Client(client.session, plane.url, reg.runner_id, reg.token)
        await c.connect()
        await c.post("admit", {"id": "a"})
        await c.post("admit", {"id": "b"})
        kept = plane.history.entries  # seqs come from the shared sequence: increasing, with gaps
        assert [e.route for e in kept] == ["admit", "admit"] and kept[0].seq < kept[1].seq
        assert plane.history.dropped == 1
        assert [e.request_body for e in plane.history.filter(route="admit")] == [{"id": "a"}, {"id": "b"}]


def test_open_counts_begun_and_unanswered_exchanges_kept_or_not() -> None:
    h = History(max_entries=1)
    _fill(h, 2)                       # the first one is evicted, still open
    assert h.open == 2
    first_gone = h.begin(time=0.0, route="admit", method="POST", runner_id="r", instance=None,
                         request_epoch=None, reset=False, request_digest=None, request_body=None)
    h.finish(first_gone)
    h.finish(first_gone)              # a second finish changes nothing
    assert h.open == 2
    h.clear()
    assert h.open == 2                # forgetting entries does not answer them
