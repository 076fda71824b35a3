"""The example database of the property machines (conformance/hypothesis_profiles.py): the
``--example-db`` specs, and one stable key per case whatever the seed, so a saved failure
replays first in a later run (no sockets: a tiny machine stands in for a family)."""

from __future__ import annotations

import pytest
from hypothesis import strategies as st
from hypothesis.database import (
    DirectoryBasedExampleDatabase,
    GitHubArtifactDatabase,
    InMemoryExampleDatabase,
    MultiplexedDatabase,
    ReadOnlyDatabase,
)
from hypothesis.stateful import RuleBasedStateMachine, rule, run_state_machine_as_test

from conformance import hypothesis_profiles as hp


class Rare(RuleBasedStateMachine):
    """Fails only when 7 is drawn: rare enough that a fresh seed alone seldom meets it."""

    runs: list[list[int]] = []

    def __init__(self) -> None:
        super().__init__()
        self.drawn: list[int] = []
        Rare.runs.append(self.drawn)

    @rule(n=st.integers(0, 60))
    def draw(self, n: int) -> None:
        self.drawn.append(n)
        assert n != 7


def _run(seed: int, db: object) -> bool:
    from hypothesis import seed as hyp_seed

    hp.use_database(db)  # type: ignore[arg-type]
    try:
        run_state_machine_as_test(hyp_seed(seed)(Rare),
                                  settings=hp.machine_settings(seed, "PROP-999"))
    except AssertionError:
        return True
    finally:
        hp.use_database(None)
    return False


def test_a_saved_failure_replays_first_under_any_seed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(hp.ENV, "thorough")
    db = InMemoryExampleDatabase()
    seed = next(s for s in range(1, 200) if _run(s, db))  # "the soak": fresh seeds until found
    keys = set(db.data)
    assert hp.machine_key("PROP-999") in keys  # the stable key, not Hypothesis' digest
    assert all(k.startswith(hp.machine_key("PROP-999")) for k in keys)
    Rare.runs.clear()
    assert _run(seed + 1000, db)  # another seed: the saved example runs first and fails
    assert 7 in Rare.runs[0], Rare.runs[0]


def test_without_a_key_nothing_is_saved() -> None:
    db = InMemoryExampleDatabase()
    hp.use_database(db)
    try:
        assert hp.machine_settings(1).database is None
    finally:
        hp.use_database(None)


def test_database_specs(tmp_path) -> None:
    d = hp.open_database([str(tmp_path / "db")])
    assert isinstance(d, DirectoryBasedExampleDatabase)
    gh = hp.open_database(["github:octo/repo"])
    assert isinstance(gh, ReadOnlyDatabase) and isinstance(gh._wrapped, GitHubArtifactDatabase)
    both = hp.open_database(["github:octo/repo/my-db", str(tmp_path / "db")])
    assert isinstance(both, MultiplexedDatabase)
    ro = hp.open_database([f"readonly:{tmp_path}"])
    assert isinstance(ro, ReadOnlyDatabase)
    (tmp_path / "file").write_text("x")
    for bad in ("github:octo", "", str(tmp_path / "file")):
        with pytest.raises(hp.DatabaseSpecError):
            hp.open_database([bad])
    with pytest.raises(hp.DatabaseSpecError):
        hp.open_database([])


def test_case_seed_is_stable() -> None:
    assert hp.case_seed(5, "a::b") == hp.case_seed(5, "a::b") != hp.case_seed(6, "a::b")
