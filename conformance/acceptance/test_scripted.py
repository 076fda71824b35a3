"""Acceptance, scripted variant: the control plane (in process) + the scripted Hermes
(``fixtures.hermes``, its bridge plugin calling the runner's listener) + the runner under test
(a black-box subprocess). One Hermes, one runner and one scenario run for the module."""
from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from fixtures.hermes import ScriptedHermes

from . import checks
from .drive import Run, run_scenario
from .scenario import ADMINS, PROFILE, scripted_hermes_script
from .sides import ScriptedSide
from .world import plane, plane_diagnosis, runner_command

pytestmark = [
    pytest.mark.acceptance,
    pytest.mark.asyncio(loop_scope="module"),
    pytest.mark.xdist_group("acceptance_scripted"),
    pytest.mark.timeout(300),
]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def scenario(pytestconfig: pytest.Config) -> AsyncIterator[tuple[Run, Any]]:
    t0 = time.monotonic()
    async with ScriptedHermes(scripted_hermes_script(), time_scale=0) as hermes:
        side = ScriptedSide(hermes)
        async with plane(hermes.url, runner_command(pytestconfig),
                         lambda: hermes.secrets) as p:
            run = await run_scenario(p.cp, p.runner_id, side)
            run.timings["runner_online_s"] = p.online_s
            run.timings["wall_s"] = time.monotonic() - t0
            checks.report(run, side)
            yield run, side
        assert hermes.effects.count("fixture.error") == 0


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


async def test_failure_diagnosis_says_who_closed_each_channel(pytestconfig: pytest.Config) -> None:
    """A failed real run's message names each channel's close and the runner's output, with
    the runner token redacted (the diagnosis that made issue 12's lost first turn readable)."""
    async with ScriptedHermes(scripted_hermes_script(), time_scale=0) as hermes:
        async with plane(hermes.url, runner_command(pytestconfig),
                         lambda: hermes.secrets) as p:
            ch = await p.cp.open_channel(p.runner_id, account=ADMINS[0], profile=PROFILE)
            assert (await p.cp.close_channel(ch)).ok
            text = plane_diagnosis(p, hermes.secrets)
    assert f"channel_closed {ch.connection_id} harness" in text, text
    assert "runner output" in text and "connected" in text, text
    assert all(s not in text for s in p.secrets), "a secret reached the diagnosis"
