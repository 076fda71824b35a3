"""Acceptance, real variant: the same scenario through a REAL Hermes Agent 0.19.0
(``hermes dashboard``) with our ``yaoyao-bot-bridge`` plugin and the scripted OpenAI-compatible
model server (``fixtures.real_hermes``), the control plane in process and the runner under test
as a subprocess. One Hermes, one runner and one scenario run for the module. Skipped with one
line when hermes-agent 0.19.0 is not installed (``scripts/setup.sh --hermes``)."""
from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from conformance.results import redact
from fixtures.real_hermes import ModelServer, RealHermes, find_hermes

from . import checks
from .drive import Run, run_scenario, warm_up
from .scenario import model_server_script
from .sides import RealSide
from .world import plane, plane_diagnosis, runner_command

HERMES_BIN, SKIP_REASON = find_hermes()
# The lost first turn of fresh-clone CI (issue 12) was Hermes' uvicorn cutting a WebSocket
# upgraded on a kept-alive connection 5 s after it opened; the runner now never reuses one
# (docs/protocol.md 8.2, WIR-907). A failure here prints the whole diagnosis.
pytestmark = [
    pytest.mark.acceptance,
    pytest.mark.skipif(HERMES_BIN is None, reason=SKIP_REASON),
    pytest.mark.asyncio(loop_scope="module"),
    pytest.mark.xdist_group("acceptance_real"),
    pytest.mark.slow,
    pytest.mark.timeout(600),
]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def scenario(pytestconfig: pytest.Config) -> AsyncIterator[tuple[Run, Any]]:
    t0 = time.monotonic()
    async with ModelServer(model_server_script()) as model, \
            RealHermes(model.base_url, hermes_bin=HERMES_BIN) as hermes:
        side = RealSide(hermes, model)

        def hermes_output() -> bytes:
            out = hermes.output()
            for log in hermes.home.rglob("*.log"):
                out += log.read_bytes()
            return out

        async with plane(hermes.url, runner_command(pytestconfig),
                         lambda: hermes.secrets, hermes_output) as p:
            try:
                warm_s = await warm_up(p.cp, p.runner_id, side, timeout=180)
                run = await run_scenario(p.cp, p.runner_id, side, timeout=180)
            except (AssertionError, TimeoutError) as exc:
                raise AssertionError(
                    f"{exc or type(exc).__name__}\n"
                    f"{diagnosis(model, hermes_output(), hermes.secrets)}\n"
                    f"{plane_diagnosis(p, hermes.secrets)}") from exc
            run.timings["warm_up_turn_s"] = warm_s
            run.timings["hermes_start_s"] = hermes.startup_seconds or 0.0
            run.timings["runner_online_s"] = p.online_s
            run.timings["wall_s"] = time.monotonic() - t0
            checks.report(run, side)
            yield run, side


def diagnosis(model: ModelServer, hermes_out: bytes, secrets: frozenset[str]) -> str:
    """What the model was asked and what Hermes wrote (secrets redacted), for a failed run."""
    calls = [f"#{c.n} rule={c.rule} step={c.step} side={c.side} {c.reply}"
             f"{' ' + c.tool if c.tool else ''}" for c in model.calls[-40:]]
    text = redact(hermes_out.decode(errors="replace"), secrets)
    tail = "\n".join(text.splitlines()[-60:])
    return (f"model calls ({len(model.calls)}, last 40):\n  " + "\n  ".join(calls)
            + f"\nHermes output and logs (last 60 lines):\n{tail}")


async def test_tool_calls_agree_at_every_hop(scenario: tuple[Run, Any]) -> None:
    checks.hops_agree(scenario[0])


async def test_lifecycle_ends_with_a_report_into_the_originating_session(
        scenario: tuple[Run, Any]) -> None:
    checks.lifecycle_and_report_back(*scenario)


async def test_a_repeated_request_id_creates_nothing_twice(scenario: tuple[Run, Any]) -> None:
    checks.repeated_request_id_creates_nothing_twice(scenario[0])


async def test_two_administrators_at_once(scenario: tuple[Run, Any]) -> None:
    checks.two_administrators_without_cross_talk(scenario[0])


async def test_revocation_mid_flight_stops_the_tools(scenario: tuple[Run, Any]) -> None:
    checks.revocation_stops_the_tools(scenario[0])
