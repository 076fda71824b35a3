"""Hypothesis, configured in this one module: the profiles, the example database and the seeds.

Rules:
- **House profiles** (the project's own tests: tests/, e2e/, conformance/ unit tests), loaded
  by the root ``conftest.py`` through :func:`load_house` from ``$HYPOTHESIS_PROFILE``:
  ``ci`` (default: derandomized, no database, 50 examples) and ``thorough`` (random, 1000).
- **Machine profiles** (the PROP-* family machines), chosen by ``$CONFORMANCE_HYPOTHESIS_PROFILE``
  (default ``ci``): ``ci`` 3 examples × 20 steps, ``certify`` 10 × 30, ``thorough`` 60 × 40,
  ``smoke`` 2 × 4 (the harness' own tests). :func:`machine_settings` builds them explicitly, never
  inheriting the loaded house profile: no deadline, the blob printed, not derandomized (a machine
  run is seeded with its case seed, ``@seed``), every phase (explicit, reuse, generate, target,
  shrink). A soak and the certify that replays it must use the same profile: a saved example
  longer than the replaying profile's step count cannot replay.
- **The database** (:func:`use_database`): ``--example-db SPEC`` (repeatable; the plugin and
  certify) or, without one, ``<--conformance-out>/hypothesis``; none otherwise. ``SPEC`` is a
  directory (``DirectoryBasedExampleDatabase``), ``github:OWNER/REPO[/ARTIFACT]`` (read-only
  ``GitHubArtifactDatabase``: the database a CI job uploaded as an artifact) or
  ``readonly:DIR``; several are joined by ``MultiplexedDatabase`` (saves go to every writable
  one, reads from all).
- **Keys** (:func:`machine_key`): a machine's examples live under ``hermes-runner-conformance/
  <case id>``, whatever the seed, runner command, checkout path, machine or Hypothesis version;
  :class:`KeyedDatabase` maps Hypothesis' own key (a digest of its internal runner and the
  class) and its sub-keys (``.secondary``, ``.pareto``) onto it. A later run reading the same
  database replays the saved example first (Hypothesis' *reuse* phase) and shrinks from it.
- **Seeds**: the run seed (:func:`fresh_seed`, printed on every run) and each case's seed
  (:func:`case_seed`, a crc32 of run seed and node id, so ``--seed N`` runs the same stories).
"""

from __future__ import annotations

import hashlib
import os
import zlib
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, Phase, Verbosity, settings
from hypothesis.database import (
    DirectoryBasedExampleDatabase,
    ExampleDatabase,
    GitHubArtifactDatabase,
    MultiplexedDatabase,
    ReadOnlyDatabase,
)

ENV = "CONFORMANCE_HYPOTHESIS_PROFILE"
HOUSE_ENV = "HYPOTHESIS_PROFILE"
#: name → (max_examples, stateful_step_count)
PROFILES: dict[str, tuple[int, int]] = {"ci": (3, 20), "thorough": (60, 40), "certify": (10, 30),
                                        "smoke": (2, 4)}  # smoke: the harness' own unit tests
SUPPRESS = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much]
HOUSE_SUPPRESS = [HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                  HealthCheck.data_too_large]
KEY_PREFIX = b"hermes-runner-conformance/"
#: Hypothesis' database key is a sha384 digest; its sub-keys are ``<digest>.<name>``
HYPOTHESIS_KEY_LEN = hashlib.sha384().digest_size

_database: ExampleDatabase | None = None


class DatabaseSpecError(ValueError):
    """An ``--example-db`` value that names no database (one line)."""


# -- house profiles ---------------------------------------------------------------------------
def load_house() -> None:
    """Register the house profiles and load ``$HYPOTHESIS_PROFILE`` (default ``ci``)."""
    settings.register_profile("ci", max_examples=50, derandomize=True, database=None,
                              deadline=None, print_blob=True, suppress_health_check=HOUSE_SUPPRESS)
    settings.register_profile("thorough", max_examples=1000, derandomize=False, deadline=None,
                              print_blob=True, suppress_health_check=HOUSE_SUPPRESS)
    settings.load_profile(os.environ.get(HOUSE_ENV, "ci"))


# -- machine profiles -------------------------------------------------------------------------
def current() -> str:
    name = os.environ.get(ENV, "ci")
    return name if name in PROFILES else "ci"


def machine_settings(seed: int | None = None, key: str | None = None) -> settings:
    """The settings of one machine run: the chosen profile, with the database (when one is in
    use) keyed by ``key`` (the case id; see :func:`machine_key`)."""
    examples, steps = PROFILES[current()]
    db = _database if _database is not None and key is not None else None
    return settings(
        max_examples=examples, stateful_step_count=steps, deadline=None, print_blob=True,
        derandomize=False, suppress_health_check=SUPPRESS, verbosity=Verbosity.normal,
        phases=(Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink),
        database=KeyedDatabase(db, machine_key(key)) if db is not None and key else None)


# -- the database -----------------------------------------------------------------------------
def machine_key(case_id: str) -> bytes:
    return KEY_PREFIX + case_id.encode()


class KeyedDatabase(ExampleDatabase):
    """``inner`` seen through one stable key: Hypothesis' key ``<digest>[.<sub>]`` is stored as
    ``<key>[.<sub>]`` (the digest depends on Hypothesis' internals, ours on the case id only)."""

    def __init__(self, inner: ExampleDatabase, key: bytes) -> None:
        super().__init__()
        self.inner, self.key = inner, key

    def _map(self, key: bytes) -> bytes:
        return self.key + key[HYPOTHESIS_KEY_LEN:]

    def save(self, key: bytes, value: bytes) -> None:
        self.inner.save(self._map(key), value)

    def fetch(self, key: bytes) -> Iterable[bytes]:
        return self.inner.fetch(self._map(key))

    def delete(self, key: bytes, value: bytes) -> None:
        self.inner.delete(self._map(key), value)

    def move(self, src: bytes, dest: bytes, value: bytes) -> None:
        self.inner.move(self._map(src), self._map(dest), value)

    def __repr__(self) -> str:
        return f"KeyedDatabase({self.inner!r}, {self.key!r})"


def example_databases(given: Sequence[str], out: Path) -> list[str]:
    """The example databases of a certify run: those ``--example-db`` gave, else the bundle's
    own ``OUT/hypothesis``."""
    return list(given) or [str(out / "hypothesis")]


def open_database(specs: Sequence[str]) -> ExampleDatabase:
    """The database ``--example-db`` names (see the module rules); :class:`DatabaseSpecError`."""
    dbs = [_one(spec) for spec in specs]
    if not dbs:
        raise DatabaseSpecError("--example-db needs a value")
    return dbs[0] if len(dbs) == 1 else MultiplexedDatabase(*dbs)


def _one(spec: str) -> ExampleDatabase:
    if spec.startswith("github:"):
        owner, _, rest = spec[len("github:"):].partition("/")
        repo, _, artifact = rest.partition("/")
        if not owner or not repo:
            raise DatabaseSpecError(f"--example-db {spec}: use github:OWNER/REPO[/ARTIFACT]")
        kw: dict[str, Any] = {"artifact_name": artifact} if artifact else {}
        return ReadOnlyDatabase(GitHubArtifactDatabase(owner, repo, **kw))
    if spec.startswith("readonly:"):
        return ReadOnlyDatabase(_one(spec[len("readonly:"):]))
    if not spec:
        raise DatabaseSpecError("--example-db needs a directory or github:OWNER/REPO")
    if os.path.exists(spec) and not os.path.isdir(spec):
        raise DatabaseSpecError(f"--example-db {spec} is not a directory")
    return DirectoryBasedExampleDatabase(spec)


def use_database(db: ExampleDatabase | None) -> None:
    """The database every machine run of this process saves to and replays from."""
    global _database  # noqa: PLW0603 - one database per process, set by the plugin
    _database = db


def database() -> ExampleDatabase | None:
    return _database


# -- seeds ------------------------------------------------------------------------------------
def fresh_seed() -> int:
    return int.from_bytes(os.urandom(4), "big")


def case_seed(run_seed: int, nodeid: str) -> int:
    return zlib.crc32(f"{run_seed}:{nodeid}".encode())
