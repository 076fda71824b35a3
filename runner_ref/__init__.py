"""runner_ref: the reference runner of Runner protocol 1 (``python -m runner_ref``).

:func:`version` is the project's version: the installed distribution's metadata, else
:data:`SOURCE_VERSION` (a source checkout; ``tests/runner_ref/test_cli.py`` keeps it equal to
``pyproject.toml``). ``python -m runner_ref --version`` prints it. It is looked up only then, so
an ordinary start-up does not pay for ``importlib.metadata``.
"""

from __future__ import annotations

DISTRIBUTION = "hermes-runner-conformance"
SOURCE_VERSION = "0.1.0"


def version() -> str:
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return installed(DISTRIBUTION)
    except PackageNotFoundError:
        return SOURCE_VERSION
