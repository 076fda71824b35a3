"""The project's own tests (tests/, e2e/, conformance/).

Hypothesis: the house profiles live with every other Hypothesis setting in
``conformance/hypothesis_profiles.py`` and are loaded here once (``load_house``):
- ``ci`` (the default): derandomized, so a run is reproducible from the commit alone; modest
  example counts; no example database (nothing left behind); no deadline (a loaded 2-core
  machine is not a failure); the failing example's blob is printed.
- ``thorough`` (``HYPOTHESIS_PROFILE=thorough``): random, 1000 examples, for exploring. The
  expensive machines size themselves with ``tests.budget.examples``.
Tests do not set ``max_examples``, ``derandomize`` or ``database`` inline.

Bytecode: pytest keeps each module it rewrites for assertions as a ``.pyc`` beside the source,
unless bytecode writing is off. Machines that set ``PYTHONDONTWRITEBYTECODE`` (ours do) made
every xdist worker rewrite every test module again on every run: about 6 s of each worker's
10 s collection, and every pytest or certify session a test starts in a subprocess did the same
for the plugins it loads. The repository's own bytecode is written anyway (``scripts/setup.sh``
compiles it), so the test run writes pytest's too, and so do the processes it starts.

Garbage collection: everything alive once collection is done (the imported packages, the
collected items, Hypothesis' strategies) lives until the session ends, yet every full
collection walked it again: about 4 s of each xdist worker's CPU, a twelfth of the run. It is
moved to the permanent generation (``gc.freeze``) when collection finishes, so a collection
walks only what the tests themselves create, and the youngest generation is collected every
10 000 allocations instead of 700 (the tests allocate in bursts: a Hypothesis example, a JSON
body); together about 7 s of the two workers' CPU.

Distribution: ``-n N`` without ``--dist`` distributes with ``worksteal`` here, not xdist's
``load``: a worker that runs dry takes half of the other's queue, so a run does not end on one
worker finishing a batch alone (with ``load``, about 5 s of the house tests' 58 s). An explicit
``--dist`` wins (the README's full run keeps ``loadgroup``: one real Hermes per module). Set
here and not in ``addopts``, which would break a run with ``-p no:xdist``.
"""

from __future__ import annotations

import gc
import os
import sys

import pytest

from conformance.hypothesis_profiles import load_house

load_house()

sys.dont_write_bytecode = False  # see "Bytecode" above
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)


def pytest_collection_finish() -> None:
    gc.collect()
    gc.freeze()  # see "Garbage collection" above
    gc.set_threshold(10_000, 50, 100)


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> None:
    # see "Distribution" above; "no" is xdist's default, which -n turns into "load"
    if getattr(config.option, "numprocesses", None) and config.option.dist == "no":
        config.option.dist = "worksteal"
