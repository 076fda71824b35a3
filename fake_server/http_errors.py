"""Answers to requests that fail before routing (aiohttp's HTTP parser), as JSON.

Rules:
- A request line or header over aiohttp's limit (8190 bytes) → **431 `request_header_too_large`**
  (upstream's Node server answers 431 to oversized headers); any other malformed HTTP →
  **400 `bad_request`**; anything else that aiohttp would answer as a bare 500 →
  **500 `internal_error`**. Both codes are our choice: upstream's application never sees these.
- The answer is ``{"error","code"}`` with ``Cache-Control: no-store``, and its text is fixed:
  aiohttp's own page echoes the offending bytes (which may hold a token), ours never does.
- The connection is closed afterwards, as aiohttp does; the log line carries no request bytes.
- aiohttp has no public hook for answers to unparseable requests: this module overrides
  ``RequestHandler.handle_error`` and ``AppRunner._make_server``. pyproject pins ``aiohttp<4``
  and tests/fake_server/test_no_store.py's malformed-HTTP cases are the tripwire for a change.
"""

from __future__ import annotations

import logging

from aiohttp import web
from aiohttp.http_exceptions import LineTooLong
from aiohttp.web_protocol import RequestHandler
from aiohttp.web_request import BaseRequest

from .codes import NO_STORE, error_body

log = logging.getLogger("fake_server.http")

_ANSWERS = {431: "request_header_too_large", 400: "bad_request", 500: "internal_error"}


def error_answer(status: int, exc: BaseException | None) -> web.Response:
    """The JSON answer for a request aiohttp could not parse or serve."""
    if isinstance(exc, LineTooLong):
        status = 431
    code = _ANSWERS.get(status, _ANSWERS[400] if status < 500 else _ANSWERS[500])
    resp = web.json_response(error_body(code), status=status, headers=NO_STORE)
    resp.force_close()
    return resp


class _JsonErrorHandler(RequestHandler):
    def handle_error(
        self,
        request: BaseRequest,
        status: int = 500,
        exc: BaseException | None = None,
        message: str | None = None,
    ) -> web.StreamResponse:
        log.info("refused a malformed request from %s: %s", request.remote, type(exc).__name__)
        if request.writer.output_size > 0:  # an answer was already on its way: nothing to add
            raise ConnectionError("response already started")
        return error_answer(status, exc)


class _JsonErrorServer(web.Server):
    def __call__(self) -> RequestHandler:
        return _JsonErrorHandler(self, loop=self._loop, **self._kwargs)


class JsonErrorAppRunner(web.AppRunner):
    """``web.AppRunner`` whose pre-routing errors are JSON (see the module rules)."""

    async def _make_server(self) -> web.Server:
        server = await super()._make_server()
        server.__class__ = _JsonErrorServer
        return server
