"""The fixtures every case can ask for: ``runner_cmd``, ``hermes_mode``, ``case_seed``,
``case_row`` and ``world`` (registered by the plugin at configure time).

The ``world`` fixture imports the world factory lazily (``--conformance-world MODULE:ATTR``,
default ``conformance.worlds:open_world``) and calls
``open_world(runner_cmd=..., hermes=..., seed=..., **case_options)``. It never imports the
runner under test.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
import pytest_asyncio

from .catalogue import PROFILE_FEATURES, Case
from .judge import STATE, load_object
from .kept_worlds import CAPACITY, Kept, Pool, begin_case, keeps_worlds, shares_world, world_key
from .results import redact
from .verdict import CaseFailed
from .witness import note_line


def session_plugin(config: pytest.Config) -> Any:
    """The session's conformance plugin (``conformance.plugin.Conformance``)."""
    plugin = config.pluginmanager.getplugin("conformance-session")
    assert plugin is not None, "the conformance plugin is not configured"
    return plugin


@pytest.fixture
def runner_cmd(request: pytest.FixtureRequest) -> str:
    """The runner command template (``--runner-cmd``; default: the reference runner)."""
    return session_plugin(request.config).runner_cmd


@pytest.fixture
def hermes_mode(request: pytest.FixtureRequest) -> str:
    """``scripted`` or ``real[:PATH]`` (``--hermes``)."""
    return str(request.config.option.hermes)


@pytest.fixture
def case_seed(request: pytest.FixtureRequest) -> int:
    """This case's seed: derived from the run seed and the node id, so a replay is exact."""
    state = request.node.stash.get(STATE, None)
    return state.seed if state else session_plugin(request.config).case_seed(request.node.nodeid)


@pytest.fixture
def case_row(request: pytest.FixtureRequest) -> Case | None:
    """The catalogue row of this case (None for an ordinary test)."""
    state = request.node.stash.get(STATE, None)
    return state.row if state else None


POOL = pytest.StashKey[Pool]()


def pool_of(config: pytest.Config) -> Pool:
    """This worker's one pool of kept worlds and rigs (:mod:`conformance.kept_worlds`), made on
    first use; its rigs are closed when the session ends (its worlds by
    ``conformance_kept_worlds``, which runs in the session's event loop)."""
    pool = config.stash.get(POOL, None)
    if pool is None:
        pool = config.stash[POOL] = new_pool(config)
        config.add_cleanup(pool.close_rigs)
    return pool


def new_pool(config: pytest.Config, capacity: int = CAPACITY) -> Pool:
    """A pool of kept worlds and rigs as this session's options say (none kept under
    ``--conformance-fresh-worlds``)."""
    fresh = bool(config.getoption("conformance_fresh_worlds", False))
    return Pool(enabled=keeps_worlds(fresh_worlds=fresh, spec=session_plugin(config).world_spec,
                                     hermes_mode=str(config.option.hermes)),
                rigs=not fresh, capacity=capacity)


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def conformance_kept_worlds(request: pytest.FixtureRequest) -> AsyncIterator[Pool]:
    """This worker's pool (:func:`pool_of`), its kept worlds closed at the session's end."""
    pool = pool_of(request.config)
    yield pool
    await pool.close()


@pytest_asyncio.fixture(loop_scope="session")
async def world(request: pytest.FixtureRequest, runner_cmd: str, hermes_mode: str,
                case_seed: int, conformance_kept_worlds: Pool) -> AsyncIterator[Any]:
    """A world per case: control plane + scripted Hermes + the runner under test — fresh, or
    the plain idle world the previous case left (:mod:`conformance.kept_worlds`; a case with
    world options, or marked ``fresh=True``, always gets a fresh one).

    After the case, the world's redacted transcript (:func:`transcript_of`) joins the case
    result and a secret found by ``world.scan_for_secrets()`` in anything the runner printed
    fails the case.
    """
    state = request.node.stash.get(STATE, None)

    def passed() -> bool:  # setup and call judged pass (pytest judges each phase as it ends)
        return state is not None and len(state.phases) >= 2 and all(
            p == "pass" for p in state.phases)

    async for w in case_world(request.config, request.node, runner_cmd=runner_cmd,
                              hermes_mode=hermes_mode, case_seed=case_seed,
                              pool=conformance_kept_worlds, passed=passed):
        yield w


async def case_world(config: pytest.Config, node: pytest.Item, *, runner_cmd: str,
                     hermes_mode: str, case_seed: int, pool: Pool,
                     passed: Callable[[], bool]) -> AsyncIterator[Any]:
    """The ``world`` fixture's steps, for the fixture and for a case on a lane
    (:mod:`conformance.lanes`): one world yielded; after the case, its transcript and secret
    scan, and the world closed or kept in ``pool`` — kept only when ``passed()`` says the case's
    setup and call passed."""
    state = node.stash.get(STATE, None)
    options = dict(state.options) if state else {}
    shares = shares_world(options)
    options.pop("fresh", None)
    spec = session_plugin(config).world_spec
    key = world_key(runner_cmd, hermes_mode, spec, options)
    open_world = load_object(spec)
    if state is None or not shares or not pool.enabled:
        await pool.drain()  # worlds dropped while no loop ran
        async with open_world(runner_cmd=runner_cmd, hermes=hermes_mode, seed=case_seed,
                              **options) as w:
            if state is not None:
                state.data["world"] = "fresh"
            _bind(state, w)
            yield w
        _finish(state, w)
        return
    kept = await pool.borrow(key)
    if kept is None:
        opened = open_world(runner_cmd=runner_cmd, hermes=hermes_mode, seed=case_seed,
                            **options)
        kept = Kept(await opened.__aenter__(), key, lambda: opened.__aexit__(None, None, None))
        # the first poll's store write (the runner's features) lands before its poll parks
        await pool.settle(kept)
    state.data["world"] = f"kept after {kept.cases[-1]}" if kept.cases else "fresh"
    kept.cases.append(state.case_id)
    begun = begin_case(kept.world)
    w = kept.world
    try:
        _bind(state, w)
        yield w
    except BaseException:
        await kept.closer()
        raise
    ok = passed()
    try:
        _finish(state, w)
    except BaseException:
        await kept.closer()
        raise
    why = await pool.give_back(kept, passed=ok, begun=begun)
    state.data["world_after"] = "kept" if why is None else f"closed: {why}"


def _bind(state: Any, w: Any) -> None:
    if state is not None:
        state.world = w
        feature = state.row.feature if state.row else "core"
        if feature not in PROFILE_FEATURES and not _advertises(w, feature):
            pytest.skip(f"not-applicable: the runner does not advertise {feature}")


def _finish(state: Any, w: Any) -> None:
    leaks: list[str] = []
    secrets = {str(s) for s in (getattr(w, "secrets", None) or ())}
    if state is not None:
        state.transcript = transcript_of(w)
    scan = getattr(w, "scan_for_secrets", None)
    if callable(scan):
        leaks = [redact(str(x), secrets) for x in scan()]
    if leaks:
        raise CaseFailed("no secret in anything the runner printed or the harness recorded",
                         f"{len(leaks)} secret leak(s)",
                         [note_line("harness", f"leak: {leak}") for leak in leaks])


def transcript_of(w: Any) -> list[Any]:
    """The case's transcript as data: ``w.evidence()`` (the default world: exchanges, lifecycle
    facts, Hermes effects, the runner's last output lines), else ``w.transcript()``; each item a
    JSON object (a dict), or text for a foreign world that yields strings."""
    for name in ("evidence", "transcript"):
        source = getattr(w, name, None)
        if callable(source):
            return [t if isinstance(t, dict | str) else str(t) for t in source()]
    return []


def _advertises(w: Any, feature: str) -> bool:
    advertises = getattr(w, "advertises", None)
    if callable(advertises):
        return bool(advertises(feature))
    features = getattr(w, "features", None)
    return True if features is None else feature in set(features)
