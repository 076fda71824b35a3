"""A tiny in-test conformance project for the engine tests: catalogue, fake world, cases.

The fake world stands in for ``conformance.world.open_world`` so the engine is tested without a
runner: it mints one secret, returns a redacted transcript, and reports a leak when asked to.
"""

from __future__ import annotations

import textwrap

import pytest

SECRET = "tok-S3CRET-4f9a1c77e2"

CATALOGUE = '''
from conformance.catalogue import Case, Catalogue
CAT = Catalogue([
    Case("GEN-001", "MUST", "A new epoch MUST drop the old channels.", "2.4", "generations"),
    Case("GEN-002", "MUST", "A stale-epoch result MUST be refused.", "2.4", "generations"),
    Case("DED-001", "SHOULD", "A duplicate SHOULD reuse the receipt.", "4.3", "dedupe"),
    Case("DED-002", "MUST", "A conflict MUST be idempotency_conflict.", "4.3", "dedupe",
         upstream="runner.test.ts#14"),
    Case("TT-001", "MUST", "A lease MUST close.", "6.1", "team tools", feature="team-tools"),
    Case("ISO-001", "MUST", "Foreign events MUST be dropped.", "2.6", "session isolation"),
    Case("CFG-001", "MUST", "The token MUST never be printed.", "1.5", "config and process"),
    Case("LIM-001", "MAY", "A runner MAY cap the payload.", "5", "limits and bad input",
         feature="artifact-chunks-v1"),
])
'''

WORLD = f'''
import contextlib

SECRET = {SECRET!r}

class World:
    def __init__(self, options):
        self.options = options
        self.secrets = {{SECRET}}
        self.features = set(options.get("advertise", ()))

    def transcript(self):
        return ["-> GET /api/runner/poll", "<- 200 {{\\"commands\\": []}} token=\\u00abredacted\\u00bb"]

    def scan_for_secrets(self):
        return [f"runner stdout line 3: token={{SECRET}}"] if self.options.get("leak") else []

@contextlib.asynccontextmanager
async def open_world(*, runner_cmd, hermes, seed, **options):
    assert "{{config}}" in runner_cmd
    yield World(options)
'''

#: GEN-002's witness line: one exchange in the one witness format (``conformance.witness``)
WITNESS = ('#41 runner→cp POST result → 200 command=c-7 epoch=e-1 server_epoch=e-2 '
           'req={"id":"c-7","result":{"status":200}} resp={"ok":true}')

CASES = '''
from conformance.marks import case
from conformance.verdict import CaseFailed, expect

@case("GEN-001")
async def test_pass(world):
    assert world.transcript()

@case("GEN-002")
async def test_fail(world):
    expect(False, expected="409 runner_epoch_stale", actual="200 {\\"ok\\": true}",
           witness=[WITNESS_LINE])

@case("DED-001")
async def test_should_fail(world):
    raise CaseFailed("one execution", "two executions")

@case("DED-002")
async def test_baselined_fail(world):
    expect(False, expected="idempotency_conflict", actual="200")

@case("TT-001")
async def test_team_tools(world):
    assert True

@case("ISO-001")
async def test_baselined_pass(world):
    assert True

@case("CFG-001", leak=True)
async def test_leak(world):
    assert True

@case("LIM-001")
async def test_not_advertised(world):
    assert False, "never runs: the runner does not advertise artifact-chunks-v1"
'''.replace("WITNESS_LINE", repr(WITNESS))


#: cases whose harness runs out, errs, or uses a program its row does not declare
HARNESS_CASES = '''
import asyncio
from conformance import environment
from conformance.marks import case

@case("GEN-001")
async def test_harness_wait_runs_out(world):
    await asyncio.wait_for(asyncio.Event().wait(), 0.01)

@case("GEN-002")
async def test_no_free_port(world):
    raise OSError(98, "Address already in use")

@case("DED-002")
async def test_uses_an_undeclared_program(world):
    environment.note_use("faketime")

@case("TT-001")
async def test_passes(world):
    assert True
'''


def make_project(pytester: pytest.Pytester, cases: str = CASES) -> None:
    pytester.makepyfile(samplecat=CATALOGUE, sampleworld=WORLD)
    pytester.makepyfile(test_cases=textwrap.dedent(cases))
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    pytester.syspathinsert()


# The plugins pyproject's addopts leaves out (a session pytester starts does not read it).
UNUSED_PLUGINS = ("-p", "no:cacheprovider", "-p", "no:benchmark", "-p", "no:respx",
                  "-p", "no:anyio")


def engine_args(*extra: str, world: str = "sampleworld:open_world") -> list[str]:
    return ["-p", "conformance.plugin", "--conformance-catalogue", "samplecat:CAT",
            "--conformance-world", world, *UNUSED_PLUGINS, *extra]
