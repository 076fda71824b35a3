"""The harness sends only what upstream's control plane could send (issue 21, item 3).

- The table (``fake_server.upstream_payloads``) answers the examples of docs/protocol.md §3, and
  ``complete`` fills the profile where upstream always names one (idempotent, never in place).
- The walk: a run of the conformance suite against the reference runner with
  ``HERMES_CONFORMANCE_COMMAND_LOG`` set records every command the cases, the property machines
  and the fault matrix submit; each one not declared ``as_sent`` (malformed on purpose) must pass
  the table. ``walk`` is shown failing on the drift this file exists for: a helper that sends
  ``session.create {"cols": 80}`` past the verbs' fill.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

from fake_server.upstream_payloads import complete, problems
from fake_server.verbs import COMMAND_LOG

ROOT = Path(__file__).resolve().parents[2]
CONN = "0b9e6f0c-52a4-4a36-9d6c-4f5e1f0a7c21"


def walk(lines: Iterable[str]) -> list[str]:
    """Every logged command upstream would not send, unless its case declared it ``as_sent``."""
    out = []
    for line in lines:
        rec: dict[str, Any] = json.loads(line)
        if rec["as_sent"]:
            continue
        found = problems(rec["kind"], rec["payload"])
        if found:
            out.append(f"{rec['case'].split(' ')[0]}: {rec['kind']} {'; '.join(found)}")
    return sorted(set(out))


def test_the_table_takes_what_upstream_sends() -> None:
    assert problems("http", {"path": "/api/files/download", "method": "GET",
                             "search": "?profile=default&path=%2Fsrv%2Fout%2Freport.txt"}) == []
    assert problems("gateway.open", {"connectionId": CONN}) == []
    assert problems("gateway.rpc", {"connectionId": CONN, "method": "session.create",
                                    "params": {"profile": "default", "cols": 100}}) == []
    assert problems("gateway.rpc", {"connectionId": CONN, "method": "session.active_list",
                                    "params": {"profile": "default", "current_session_id": "5748f884"}}) == []
    assert problems("lease.create", {"leaseId": CONN, "profile": "default", "workId": CONN,
                                     "session": {"runtimeId": "5748f884", "storedId": "s1"},
                                     "catalog": [], "workspaceMemory": False}) == []


@pytest.mark.parametrize(("kind", "payload", "why"), [
    ("gateway.rpc", {"connectionId": CONN, "method": "session.create", "params": {"cols": 80}},
     "session.create params lack profile"),
    ("gateway.rpc", {"connectionId": CONN, "method": "session.active_list",
                     "params": {"current_session_id": "5748f884"}}, "session.active_list params lack profile"),
    ("http", {"path": "/api/config", "method": "GET", "search": ""}, "search names no profile"),
    ("http", {"path": "/api/config", "method": "GET", "search": "profile=default"},
     "search is not URL.search (empty or beginning with '?')"),
    ("lease.bind", {"leaseId": CONN, "session": {"runtimeId": "5748f884"}}, "session is not {runtimeId, storedId}"),
    ("hermes.bogus", {}, "kind 'hermes.bogus' is not a core kind upstream sends"),
])
def test_the_table_refuses_what_upstream_never_sends(kind: str, payload: dict[str, Any], why: str) -> None:
    assert why in problems(kind, payload)


def test_complete_fills_the_profile_as_upstream_does() -> None:
    create = {"connectionId": CONN, "method": "session.create", "params": {"cols": 80}}
    filled = complete("gateway.rpc", create, "research")
    assert filled["params"] == {"cols": 80, "profile": "research"} and create["params"] == {"cols": 80}
    assert complete("gateway.rpc", filled, "default") == filled  # idempotent; a named one stays
    assert complete("gateway.rpc", create, None)["params"]["profile"] == "default"
    http = {"path": "/api/files/download", "method": "GET", "search": "?path=%2Fa"}
    assert complete("http", http, None)["search"] == "?profile=default&path=%2Fa"
    assert complete("http", {"path": "/api/status", "method": "GET"}, "a b")["search"] == "?profile=a%20b"
    odd = {"path": "/api/status", "method": "GET", "search": "profile=x"}
    assert complete("http", odd, None) is odd  # not URL.search: left as given


def test_the_walk_fails_on_a_helper_that_drifts() -> None:
    """The drift of issue 21: ``session.create {"cols": 80}`` sent without the verbs' fill."""
    line = json.dumps({"kind": "gateway.rpc", "as_sent": False, "case": "conformance/cases/x.py::t (call)",
                       "payload": {"connectionId": CONN, "method": "session.create", "params": {"cols": 80}}})
    assert walk([line]) == ["conformance/cases/x.py::t: gateway.rpc session.create params lack profile"]
    declared = json.loads(line) | {"as_sent": True}
    assert walk([json.dumps(declared)]) == []


@pytest.mark.slow
def test_every_command_a_run_submits_is_one_upstream_could_send(tmp_path: Path) -> None:
    """A whole conformance run against the reference runner (minutes): every command logged."""
    log = tmp_path / "commands.jsonl"
    env = {**os.environ, COMMAND_LOG: str(log), "PYTHONPATH": str(ROOT)}
    subprocess.run([sys.executable, "-m", "pytest", "conformance", "-q", "-n", "2", "-p", "no:randomly",
                    "-p", "no:cacheprovider", "--conformance-out", str(tmp_path / "out")],
                   cwd=ROOT, env=env, capture_output=True, check=False, timeout=3600)
    lines = log.read_text(encoding="utf-8").splitlines()
    cases = {json.loads(x)["case"].split("::")[0] for x in lines}
    # not vacuous: the machines and the matrix were walked too
    assert {"conformance/cases/test_fault_matrix.py", "conformance/cases/test_properties.py"} <= cases
    assert walk(lines) == []
