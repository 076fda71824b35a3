"""Store: registrations, tokens, accounts, sources, restart persistence."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Sequence
from pathlib import Path

import pytest

from fake_server.store import Store, StoreError, b64url_token_ok


async def test_runner_roundtrip_and_persistence(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    store = await Store.open(db)
    rec, token = await store.create_runner(
        name="r1", source_node_id="local", allowed_profiles=["default"], owner="admin"
    )
    assert len(token) == 43 and b64url_token_ok(token)
    assert rec.token_hash == hashlib.sha256(token.encode()).hexdigest()
    assert token not in repr(rec) and rec.token_hash not in repr(rec)
    s = rec.summary(online=False)
    assert set(s) == {"id", "name", "sourceNodeId", "allowedProfiles", "enabled", "createdAt",
                      "features", "online"}
    await store.set_runner_features(rec.id, ["credential-ref-v1"])
    await store.close()
    store = await Store.open(db)
    got = await store.get_runner(rec.id)
    assert got is not None and got.features == ("credential-ref-v1",) and got.enabled
    assert await store.disable_runner(rec.id)
    assert not await store.disable_runner("nope")
    assert [r.id for r in await store.list_runners()] == [rec.id]
    assert not (await store.list_runners())[0].enabled
    await store.close()


async def test_source_rules(tmp_path: Path) -> None:
    store = await Store.open(tmp_path / "s.db")
    try:
        assert [s.id for s in await store.list_sources()] == ["local"]
        with pytest.raises(StoreError) as e:
            await store.create_runner(name="x", source_node_id="ghost",
                                      allowed_profiles=["default"], owner="admin")
        assert (e.value.status, e.value.code) == (404, "workspace_not_found")
        await store.add_source("web1", "Web", paired=True)
        with pytest.raises(StoreError) as e:
            await store.create_runner(name="x", source_node_id="web1",
                                      allowed_profiles=["default"], owner="admin")
        assert (e.value.status, e.value.code) == (409, "runner_source_invalid")
        # two admins racing for the same source: exactly one wins
        results = await asyncio.gather(
            *(store.create_runner(name=f"r{i}", source_node_id="local",
                                  allowed_profiles=["default"], owner=f"a{i}") for i in range(5)),
            return_exceptions=True,
        )
        wins = [r for r in results if not isinstance(r, BaseException)]
        errs = [r for r in results if isinstance(r, StoreError)]
        assert len(wins) == 1 and len(errs) == 4
        assert all(e.code == "runner_source_in_use" for e in errs)
        rec = wins[0][0]  # type: ignore[index]
        await store.disable_runner(rec.id)
        await store.create_runner(name="again", source_node_id="local",
                                  allowed_profiles=["default"], owner="admin")
    finally:
        await store.close()


async def test_accounts(tmp_path: Path) -> None:
    store = await Store.open(tmp_path / "s.db")
    try:
        acc = await store.create_account("alice", allowed_profiles=["default"], password="pw1")
        assert acc.authorization_version == 1 and acc.active
        assert await store.check_password("alice", "pw1") is not None
        assert await store.check_password("alice", "nope") is None
        assert await store.check_password("ghost", "pw1") is None
        assert await store.bump_authorization("alice") == 2
        await store.set_account_profiles("alice", ["a", "b"])
        await store.set_account_active("alice", False)
        got = await store.get_account("alice")
        assert got is not None and got.allowed_profiles == ("a", "b") and not got.active
        assert got.authorization_version == 2
    finally:
        await store.close()


async def test_records_are_cached_and_every_write_is_seen_at_once(tmp_path: Path) -> None:
    """The cache (machine API hot path) never serves a record older than a write made through
    the Store API; a new Store (a restart) reads SQLite again."""
    db = tmp_path / "s.db"
    store = await Store.open(db)
    rec, _ = await store.create_runner(name="r", source_node_id="local", allowed_profiles=["a"], owner="x")
    await store.create_account("al", allowed_profiles=["a"])
    assert await store.get_runner(rec.id) is await store.get_runner(rec.id)  # served from memory
    assert await store.get_account("al") is await store.get_account("al")
    assert await store.get_source("local") is await store.get_source("local")
    await store.set_runner_features(rec.id, ["local-vm-v1"])
    await store.set_runner_profiles(rec.id, ["a", "b"])
    got = await store.get_runner(rec.id)
    assert got is not None and got.features == ("local-vm-v1",) and got.allowed_profiles == ("a", "b")
    await store.disable_runner(rec.id)
    assert not (await store.get_runner(rec.id)).enabled  # type: ignore[union-attr]
    await store.set_account_profiles("al", ["b"])
    assert (await store.get_account("al")).allowed_profiles == ("b",)  # type: ignore[union-attr]
    v = await store.bump_authorization("al")
    assert (await store.get_account("al")).authorization_version == v  # type: ignore[union-attr]
    await store.set_account_active("al", False)
    assert not (await store.get_account("al")).active  # type: ignore[union-attr]
    await store.create_account("al", allowed_profiles=["c"])  # replaced
    assert (await store.get_account("al")).allowed_profiles == ("c",)  # type: ignore[union-attr]
    await store.get_source("n1")
    await store.add_source("n1", "node", allowed_profiles=["a"])
    assert (await store.get_source("n1")).allowed_profiles == ("a",)  # type: ignore[union-attr]
    await store.add_source("n1", "node", allowed_profiles=None)
    assert (await store.get_source("n1")).allowed_profiles is None  # type: ignore[union-attr]
    # unknown names are never cached: a later create is seen
    assert await store.get_account("bo") is None
    await store.create_account("bo", allowed_profiles=["a"])
    assert await store.get_account("bo") is not None
    # a read racing a write never caches the old row
    await store.close()
    store = await Store.open(db)
    try:
        reads = [asyncio.create_task(store.get_runner(rec.id)) for _ in range(3)]
        write = asyncio.create_task(store.set_runner_profiles(rec.id, ["z"]))
        await asyncio.gather(*reads, write)
        assert (await store.get_runner(rec.id)).allowed_profiles == ("z",)  # type: ignore[union-attr]
        accs = [asyncio.create_task(store.get_account("al")) for _ in range(3)]
        bump = asyncio.create_task(store.bump_authorization("al"))
        await asyncio.gather(*accs, bump)
        assert (await store.get_account("al")).authorization_version == bump.result()  # type: ignore[union-attr]
    finally:
        await store.close()


async def test_features_are_written_only_when_they_change() -> None:
    import aiohttp

    from fake_server import ControlPlane, ManualClock

    from .fake_server_client import Client

    async with ControlPlane(clock=ManualClock()) as cp, aiohttp.ClientSession() as http:
        reg = await cp.register_runner()
        writes: list[tuple[str, ...]] = []
        real = cp.store.set_runner_features

        async def counting(runner_id: str, features: Sequence[str]) -> None:
            writes.append(tuple(features))
            await real(runner_id, features)

        cp.store.set_runner_features = counting  # type: ignore[method-assign]
        c = Client(http, cp.url, reg.runner_id, reg.token, features="credential-ref-v1,local-vm-v1")
        await c.connect()
        for _ in range(5):
            await c.post("admit", {"id": "x"})
        c.features = "local-vm-v1,credential-ref-v1"  # same names, other order: a change
        await c.post("admit", {"id": "x"})
        await c.post("admit", {"id": "x"})
        assert writes == [("credential-ref-v1", "local-vm-v1"), ("local-vm-v1", "credential-ref-v1")]
