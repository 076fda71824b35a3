"""tests/runner_ref: make the local helper modules importable (pytest runs in importlib mode),
and scan the output of every runner subprocess a test started for every secret it could know."""
from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from fixtures import ScriptedHermes

from .runner_proc import RunnerProcess
from .secret_scan import scan
from .stub_hermes import StubHermes


@pytest.fixture(autouse=True)
def no_secret_in_runner_output(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Teardown: no runner token, Hermes password or Hermes session token in any byte of any
    runner subprocess's stdout/stderr (configs are read at teardown, Hermes tokens recorded as
    the fixtures start, including every token a StubHermes rotated through)."""
    runners: list[RunnerProcess] = []
    hermeses: list[Any] = []
    start_runner, start_scripted = RunnerProcess.start, ScriptedHermes.start
    enter_stub = StubHermes.__aenter__

    async def runner_start(self: RunnerProcess) -> RunnerProcess:
        runners.append(self)
        return await start_runner(self)

    async def scripted_start(self: ScriptedHermes) -> ScriptedHermes:
        hermeses.append(self)
        return await start_scripted(self)

    async def stub_enter(self: StubHermes) -> StubHermes:
        hermeses.append(self)
        return await enter_stub(self)

    monkeypatch.setattr(RunnerProcess, "start", runner_start)
    monkeypatch.setattr(ScriptedHermes, "start", scripted_start)
    monkeypatch.setattr(StubHermes, "__aenter__", stub_enter)
    yield
    scan(runners, hermeses)
