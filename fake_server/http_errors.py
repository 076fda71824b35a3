"""Answers to requests that fail before routing (aiohttp's HTTP parser), as JSON.

Rules:
- A request line or header over aiohttp's limit (8190 bytes) → **431 `request_header_too_large`**
  (upstream's Node server answers 431 to oversized headers); any other malformed HTTP →
  **400 `bad_request`**; anything else that aiohttp would answer as a bare 500 →
  **500 `internal_error`**. Both codes are our choice: upstream's application never sees these.
- The answer is ``{"error","code"}`` with ``Cache-Control: no-store``, and its text is fixed:
  aiohttp's own page echoes the offending bytes (which may hold a token), ours never does.
- The connection is closed afterwards, as aiohttp does; the log line carries no request bytes.

How, with aiohttp's public surface only: an unparseable request never reaches the application
(no middleware or signal sees it); aiohttp answers it from ``RequestHandler.handle_error``, the
per-connection protocol's documented-by-name override point. ``web.Server`` is, as aiohttp's
low-level-server docs put it, the protocol factory for ``loop.create_server``; so instead of a
``web.SockSite`` we listen ourselves (:class:`JsonErrorListener`) with a factory that builds our
``web.RequestHandler`` subclass around the runner's public ``AppRunner.server``. Nothing private
is read or replaced; tests/fake_server/test_no_store.py's malformed-HTTP cases fail if the
answer is aiohttp's own again.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from typing import Any

from aiohttp import web
from aiohttp.http_exceptions import LineTooLong

from . import codes
from .codes import NO_STORE, error_body

log = logging.getLogger("fake_server.http")

_ANSWERS: dict[int, codes.Code] = {431: codes.REQUEST_HEADER_TOO_LARGE, 400: codes.BAD_REQUEST,
                                   500: codes.INTERNAL_ERROR}


def error_answer(status: int, exc: BaseException | None) -> web.Response:
    """The JSON answer for a request aiohttp could not parse or serve."""
    if isinstance(exc, LineTooLong):
        status = 431
    code = _ANSWERS.get(status, _ANSWERS[400] if status < 500 else _ANSWERS[500])
    resp = web.json_response(error_body(code), status=status, headers=NO_STORE)
    resp.force_close()
    return resp


class JsonErrorHandler(web.RequestHandler):
    """aiohttp's per-connection protocol, answering pre-routing errors as :func:`error_answer`."""

    def handle_error(
        self,
        request: web.BaseRequest,
        status: int = 500,
        exc: BaseException | None = None,
        message: str | None = None,
    ) -> web.StreamResponse:
        log.info("refused a malformed request from %s: %s", request.remote, type(exc).__name__)
        if request.writer.output_size > 0:  # an answer was already on its way: nothing to add
            raise ConnectionError("response already started")
        return error_answer(status, exc)


class JsonErrorListener:
    """Serves a set-up ``web.AppRunner`` on a bound socket with :class:`JsonErrorHandler`.

    ``handler_args`` are the ``RequestHandler`` keywords (``access_log=None``, limits …); the
    ``web.Server`` keywords (``handler_cancellation``) stay on the ``AppRunner``. Close the
    listener before ``runner.cleanup()`` (as ``web.SockSite.stop`` would), then ``wait_closed``.
    """

    def __init__(self, runner: web.AppRunner, sock: socket.socket, **handler_args: Any) -> None:
        self._runner = runner
        self._sock = sock
        self._handler_args = handler_args
        self._server: asyncio.AbstractServer | None = None

    async def start(self) -> None:
        manager = self._runner.server
        if manager is None:
            raise RuntimeError("call runner.setup() before starting the listener")
        loop = asyncio.get_running_loop()

        def protocol() -> JsonErrorHandler:
            return JsonErrorHandler(manager, loop=loop, **self._handler_args)

        self._server = await loop.create_server(protocol, sock=self._sock)

    def close(self) -> None:
        """Stop accepting connections; open ones are closed by ``runner.cleanup()``."""
        if self._server is not None:
            self._server.close()

    async def wait_closed(self) -> None:
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None
