"""Answers to requests that fail before routing (aiohttp's HTTP parser), as JSON.

Rules:
- A request line or header over aiohttp's limit (8190 bytes) → **431 `request_header_too_large`**
  (upstream's Node server answers 431 to oversized headers); any other malformed HTTP →
  **400 `bad_request`**; anything else that aiohttp would answer as a bare 500 →
  **500 `internal_error`**. Both codes are our choice: upstream's application never sees these.
- The answer is ``{"error","code"}`` with ``Cache-Control: no-store``, and its text is fixed:
  aiohttp's own page echoes the offending bytes (which may hold a token), ours never does.
- The connection is closed afterwards, as aiohttp does; the log line carries no request bytes.
"""

from __future__ import annotations

import json
import logging

from aiohttp import web
from aiohttp.http_exceptions import LineTooLong
from aiohttp.web_protocol import RequestHandler
from aiohttp.web_request import BaseRequest

log = logging.getLogger("fake_server.http")

_ANSWERS = {
    431: ("request_header_too_large", "request line or header too large"),
    400: ("bad_request", "malformed HTTP request"),
    500: ("internal_error", "internal error"),
}


def error_answer(status: int, exc: BaseException | None) -> web.Response:
    """The JSON answer for a request aiohttp could not parse or serve."""
    if isinstance(exc, LineTooLong):
        status = 431
    code, text = _ANSWERS.get(status, _ANSWERS[400] if status < 500 else _ANSWERS[500])
    resp = web.Response(
        status=status,
        body=json.dumps({"error": text, "code": code}).encode(),
        content_type="application/json",
        headers={"Cache-Control": "no-store"},
    )
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
