"""The ledger's SQLite storage: durability across reopen, group commit, retirement, and the
store following ``ledger.TRANSITIONS`` (its SQL guards are derived from the table)."""
from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from runner_ref import ledger as L
from runner_ref.ledger import State
from runner_ref.ledger_store import SQL_RETIRE, LedgerStore


async def test_start_complete_reopen(tmp_path: Path) -> None:
    path = str(tmp_path / "runner-commands.sqlite3")
    store = await LedgerStore.open(path)
    assert await store.get("a") is None
    await store.claim("a", "fp-a", 1000)
    await store.claim("b", "fp-b", 1000)
    await store.complete("a", json.dumps({"result": {"x": 1}}))
    await store.close()
    store = await LedgerStore.open(path)
    a, b = await store.get("a"), await store.get("b")
    assert a is not None and a.state is State.COMPLETE and json.loads(a.result or "") == {"result": {"x": 1}}
    assert b is not None and b.state is State.STARTED and b.result is None and b.fingerprint == "fp-b"
    await store.close()


async def test_upstream_schema_and_pragmas(tmp_path: Path) -> None:
    path = str(tmp_path / "l.sqlite3")
    store = await LedgerStore.open(path)
    await store.claim("a", "f", 1)
    await store.close()
    conn = sqlite3.connect(path)
    cols = [(r[1], r[2], r[3], r[5]) for r in conn.execute("PRAGMA table_info(commands)")]
    assert cols == [("id", "TEXT", 0, 1), ("fingerprint", "TEXT", 1, 0), ("state", "TEXT", 1, 0),
                    ("result", "TEXT", 0, 0), ("created", "INTEGER", 1, 0)]
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    conn.close()


async def test_group_commit_many_concurrent_writers(tmp_path: Path) -> None:
    store = await LedgerStore.open(str(tmp_path / "l.sqlite3"))
    await asyncio.gather(*(store.claim(f"c{i}", "f", i) for i in range(300)))
    await asyncio.gather(*(store.complete(f"c{i}", '{"result":null}') for i in range(300)))
    rows = await asyncio.gather(*(store.get(f"c{i}") for i in range(300)))
    assert all(r is not None and r.state is State.COMPLETE for r in rows)
    await store.close()


async def test_complete_only_from_started(tmp_path: Path) -> None:
    store = await LedgerStore.open(str(tmp_path / "l.sqlite3"))
    await store.complete("ghost", '{"result":1}')
    assert await store.get("ghost") is None
    await store.close()


async def test_retire_old_complete_rows_only(tmp_path: Path) -> None:
    store = await LedgerStore.open(str(tmp_path / "l.sqlite3"))
    hour = 3_600_000
    await store.claim("old", "f", 0)
    await store.complete("old", '{"result":1}')
    await store.claim("old-started", "f", 0)
    await store.claim("new", "f", 5 * hour)
    await store.complete("new", '{"result":2}')
    await store.retire(5 * hour + 1, hour)
    old, started, new = (await store.get("old"), await store.get("old-started"),
                         await store.get("new"))
    assert old is not None and old.state is State.RETIRED and old.result is None
    assert started is not None and started.state is State.STARTED
    assert new is not None and new.state is State.COMPLETE
    await store.close()


async def test_claim_is_atomic_read_and_start(tmp_path: Path) -> None:
    store = await LedgerStore.open(str(tmp_path / "l.sqlite3"))
    # the same id claimed twice in one batch: exactly one claimer owns the new row
    a, b, c = await asyncio.gather(store.claim("x", "f1", 5), store.claim("x", "f2", 6),
                                   store.claim("y", "f", 7))
    assert a is None and c is None
    assert b is not None and b.state is State.STARTED and b.fingerprint == "f1"
    await store.complete("x", '{"result":1}')
    row = await store.claim("x", "f1", 8)
    assert row is not None and row.state is State.COMPLETE and row.result == '{"result":1}'
    await store.close()


async def test_many_claims_span_chunks(tmp_path: Path) -> None:
    store = await LedgerStore.open(str(tmp_path / "l.sqlite3"))
    first = await asyncio.gather(*(store.claim(f"c{i}", "f", i) for i in range(1000)))
    assert all(r is None for r in first)
    await asyncio.gather(*(store.complete(f"c{i}", f'{{"result":{i}}}') for i in range(1000)))
    again = await asyncio.gather(*(store.claim(f"c{i}", "f", i) for i in range(1000)))
    assert [json.loads(r.result or "")["result"] for r in again if r] == list(range(1000))
    await store.close()


HOUR = 3_600_000


async def _row_in(store: LedgerStore, state: State | None) -> None:
    """Bring row "x" (created at 0) into ``state`` through the store's own operations."""
    if state is None:
        return
    await store.claim("x", "f", 0)
    if state in (State.COMPLETE, State.RETIRED):
        await store.complete("x", '{"result":1}')
    if state is State.RETIRED:
        await store.retire(10 * HOUR, HOUR)


async def _apply(store: LedgerStore, event: L.Event) -> None:
    if event is L.Event.START:
        await store.claim("x", "f", 0)
    elif event is L.Event.COMPLETE:
        await store.complete("x", '{"result":2}')
    else:
        await store.retire(10 * HOUR, HOUR)   # the row is old enough to retire


@pytest.mark.parametrize("event", list(L.Event), ids=lambda e: e.value)
@pytest.mark.parametrize("state", [None, *State], ids=lambda s: s.value if s else "absent")
async def test_the_store_follows_the_transition_table(tmp_path: Path, state: State | None,
                                                      event: L.Event) -> None:
    """Every (state, event) pair: the store moves the row exactly as ``TRANSITIONS`` says, and
    leaves it as it was where the table has no entry."""
    store = await LedgerStore.open(str(tmp_path / "l.sqlite3"))
    await _row_in(store, state)
    before = await store.get("x")
    assert (before.state if before else None) is state
    await _apply(store, event)
    after = await store.get("x")
    expected = L.TRANSITIONS[state].get(event, state)
    assert (after.state if after else None) is expected
    await store.close()


def test_sql_guards_come_from_the_table() -> None:
    assert L.source_state(L.Event.START) is None
    assert L.source_state(L.Event.COMPLETE) is State.STARTED
    assert L.source_state(L.Event.RETIRE) is State.COMPLETE
    assert f"WHERE state='{L.source_state(L.Event.RETIRE).value}'" in SQL_RETIRE  # type: ignore[union-attr]
    assert f"SET state='{L.target_state(L.Event.RETIRE).value}'" in SQL_RETIRE


@given(rows=st.lists(st.tuples(st.sampled_from(["started", "complete"]), st.integers(0, 5 * HOUR)),
                     min_size=1, max_size=8),
       now=st.integers(0, 6 * HOUR), after=st.sampled_from([0, 1, HOUR]))
def test_sql_retire_agrees_with_retire_due(rows: list[tuple[str, int]], now: int,
                                           after: int) -> None:
    """``SQL_RETIRE`` and ``ledger.retire_due`` are one rule: on any rows, the store retires
    exactly the rows ``retire_due`` names."""
    import sqlite3
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE commands(id TEXT PRIMARY KEY, fingerprint TEXT, state TEXT, "
                 "result TEXT, created INTEGER)")
    for i, (state, created) in enumerate(rows):
        conn.execute("INSERT INTO commands VALUES (?, 'f', ?, ?, ?)",
                     (f"c{i}", state, "1" if state == "complete" else None, created))
    due = {f"c{i}" for i, (state, created) in enumerate(rows)
           if L.retire_due(L.Row(f"c{i}", "f", State(state), None, created), now, after)}
    conn.execute(SQL_RETIRE, (now - after,))
    retired = {r[0] for r in conn.execute("SELECT id FROM commands WHERE state='retired'")}
    conn.close()
    assert retired == due
