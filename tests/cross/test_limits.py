"""Differential: the limits of docs/protocol.md §5 (parsed) against both packages' tables.

``fake_server/timings.py`` (``Timings``, ``Limits``) and ``runner_ref/timings.py`` keep their
numbers independently on purpose. Each doc row's numbers (with units: KiB, MiB, s, min, h) are
compared with the constants that enforce them, on every side that enforces them.
Found: all agree. Not compared: the 75 s ``desktop`` request timeout (the reference runner has
no ``desktop`` kind), the 10 s header timeout (aiohttp has none; see listener.py) and the VM
extension row.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from fake_server import tool_calls
from fake_server.timings import Limits, Timings
from runner_ref import timings as rt

PROTOCOL = Path(__file__).resolve().parents[2] / "docs" / "protocol.md"
UNITS = {"KiB": 1024, "MiB": 1024 * 1024, "s": 1, "min": 60, "h": 3600, "": 1}
NUMBER = re.compile(r"(\d+(?:\.\d+)?)\s*(KiB|MiB|min|s|h)?\b")


def limit_rows(text: str) -> dict[str, list[float]]:
    section = text.split("\n## 5. Limits\n", 1)[1].split("\n## ", 1)[0]
    rows: dict[str, list[float]] = {}
    for line in section.splitlines():
        if not line.startswith("|") or line.startswith(("| Item", "|---")):
            continue
        item, limit = (c.strip() for c in line.strip("|").split("|"))
        limit = re.sub(r"`[^`]*`", "", limit)
        rows[item] = [float(n) * UNITS[u] for n, u in NUMBER.findall(limit)]
    return rows


S, L = Timings(), Limits()
# doc item → the numbers in its cell, each as the tuple of constants (both sides) that hold it
EXPECTED: dict[str, list[tuple[float, ...]]] = {
    "pending commands per runner": [(L.pending_commands,)],
    "queued bytes per runner": [(L.queued_bytes,)],
    "one command": [(L.single_command,)],
    "poll batch": [(L.poll_batch,)],
    "long-poll hold": [(S.poll_hold,)],
    "redelivery interval": [(S.redelivery,)],
    "command deadline": [(S.command_deadline,), (S.bind_deadline,), (S.extract_deadline,)],
    "request body to the control plane": [(L.request_body,), (L.desktop_body,)],
    "response read by the runner": [(rt.RESPONSE_CAP,)],
    "runner request timeouts": [(rt.REQUEST_TIMEOUT, rt.POLL_TIMEOUT), (75,),
                                (rt.TOOL_RELAY_LONG_TIMEOUT,)],
    "reconnect delay": [(rt.RECONNECT_DELAY,)],
    "watchdog": [(S.watchdog_tick,), (S.offline_after,)],
    "retired instances per runner": [(L.retired_instances,)],
    "error message in a result": [(L.result_error_text, rt.ERROR_TEXT_CAP)],
    "control-plane error text printed by the runner": [(rt.SERVER_ERROR_CAP,)],
    "relayed Hermes HTTP body": [(rt.HERMES_BODY_CAP,)],
    "channels per runner / leases per runner": [(rt.MAX_CHANNELS,), (rt.MAX_LEASES,)],
    "tool calls per lease": [(L.tool_calls_per_lease, tool_calls.CALL_LIMIT, rt.MAX_CALLS)],
    "`toolId` / `callId`": [(1,), (rt.MAX_TOOL_ID,), (1,), (rt.MAX_CALL_ID,)],
    "loopback tool-call body": [(rt.LISTENER_MAX_BODY,), (rt.LISTENER_MAX_DEPTH,)],
    "loopback listener": [(rt.LISTENER_REQUEST_TIMEOUT,), (10,), (rt.LISTENER_MAX_HEADERS,),
                          (rt.LISTENER_KEEPALIVE,)],
    "lease lifetime": [(rt.LEASE_TTL,), (rt.LEASE_RENEW_EVERY,)],
    "tombstones": [(rt.TOMBSTONE_TTL,)],
    "interrupt wait on close": [(rt.INTERRUPT_WAIT,)],
    "ledger retirement": [(rt.RETIRE_AFTER,), (rt.RETIRE_EVERY_COMMANDS,)],
    "artifacts": [(L.artifact_size,), (L.artifacts_per_channel,), (L.artifact_unfinished,),
                  (L.artifact_chunk,)],
}
NOT_COMPARED = {"VM history slice / VM file transfer"}


@pytest.fixture(scope="module")
def doc() -> dict[str, list[float]]:
    return limit_rows(PROTOCOL.read_text(encoding="utf-8"))


def test_every_doc_row_is_compared(doc: dict[str, list[float]]) -> None:
    assert set(doc) == set(EXPECTED) | NOT_COMPARED


@pytest.mark.parametrize("item", sorted(EXPECTED))
def test_doc_and_packages_agree(doc: dict[str, list[float]], item: str) -> None:
    assert [{n} for n in doc[item]] == [set(sides) for sides in EXPECTED[item]], item


def test_the_parser_reads_units() -> None:
    text = ("## 5. Limits\n\n| Item | Limit |\n|---|---|\n| a | 64 MiB; 2 KiB |\n"
            "| b | 30 min, `x1` 5 s; 1 h |\n\n## 6. Next\n")
    assert limit_rows("\n" + text) == {"a": [64 * 2**20, 2048], "b": [1800, 5, 3600]}
