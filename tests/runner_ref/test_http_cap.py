"""The ``http`` kind relays at most 8 MiB of Hermes body (real loopback server, real client)."""
from __future__ import annotations

import base64

import pytest

from runner_ref import timings
from runner_ref.errors import CommandError
from runner_ref.hermes import HermesClient
from runner_ref.http_kind import run_http

from .stub_hermes import StubHermes

CAP = 8 * 1024 * 1024
GET_CONFIG = {"path": "/api/config", "method": "GET", "search": "?profile=default"}


@pytest.mark.parametrize("chunked", [False, True])
async def test_8_mib_relayed_one_byte_more_refused(chunked: bool) -> None:
    assert timings.HERMES_BODY_CAP == CAP
    async with StubHermes() as stub:
        stub.chunked = chunked
        hermes = HermesClient(stub.url, None)
        try:
            stub.body_size = CAP
            out = await run_http(dict(GET_CONFIG), hermes, ("default",), ())
            assert out["status"] == 200 and len(base64.b64decode(out["body"])) == CAP
            stub.body_size = CAP + 1
            with pytest.raises(CommandError) as info:
                await run_http(dict(GET_CONFIG), hermes, ("default",), ())
            assert (info.value.code, info.value.status) == ("hermes_response_too_large", 502)
        finally:
            await hermes.close()
