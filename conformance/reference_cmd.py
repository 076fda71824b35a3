"""The reference runner's command template, written once.

``{python} -m runner_ref --config {config}``: the default ``--runner-cmd`` of the suite, certify,
the demo, the negative controls' self-test and the benches.

Rules of this module:
- A string only: ``conformance`` never imports ``runner_ref`` (tests/test_independence.py); the
  reference runner is started like any vendor runner, from this template, as a black box.
- ``{python}`` is this interpreter (``sys.executable``), shell-quoted; ``{config}`` is left for
  the adapter, which puts the ``runner.json`` path there (conformance/adapter.py).
- Interpreter options go between the interpreter and ``-m runner_ref`` (a profiler:
  ``reference_runner_cmd("-m", "cProfile", "-o", PATH)``), each shell-quoted.
- Sans-IO: nothing is read or started here.
"""

from __future__ import annotations

import shlex
import sys
from typing import Final

#: the module the reference runner is started as
MODULE: Final = "runner_ref"


def reference_runner_cmd(*interpreter_args: str, python: str = sys.executable) -> str:
    """The reference runner's ``--runner-cmd`` template, ``interpreter_args`` before ``-m``."""
    return f"{shlex.join([python, *interpreter_args])} -m {MODULE} --config {{config}}"


#: the default ``--runner-cmd`` of the suite, certify and the demo
REFERENCE_RUNNER_CMD: Final = reference_runner_cmd()
