"""What the runner imports before it binds a lease: not the server half of aiohttp.

The loopback listener imports ``aiohttp.web`` when it starts (``teamtools/listener.py``), so a
runner that never binds a lease does not pay for it at each start-up. Checked in a fresh
interpreter: the modules the poll loop needs are imported and ``sys.modules`` is read.
"""

from __future__ import annotations

import json
import subprocess
import sys

PROBE = """
import json, sys
import runner_ref.__main__, runner_ref.poll_loop, runner_ref.ledger_store
import runner_ref.hermes, runner_ref.gateway, runner_ref.machine_client
print(json.dumps(sorted(m for m in sys.modules if m.startswith("aiohttp"))))
"""


def test_the_poll_loop_does_not_import_aiohttp_web() -> None:
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                         check=True, timeout=60)
    loaded = json.loads(out.stdout)
    assert "aiohttp.client" in loaded  # the probe did import the runner's client side
    assert [m for m in loaded if m == "aiohttp.web" or m.startswith("aiohttp.web_")] == []

