"""The admin web page (``/admin/``): static files from ``fake_server/static`` with a strict CSP."""

from __future__ import annotations

from pathlib import Path

from aiohttp import web

STATIC_DIR = Path(__file__).with_name("static")
#: what ``/admin/static/{name}`` serves: the style sheet and the page's ES modules (app.js is the
#: entry index.html loads; it imports api.js and views.js). Any other name is a 404.
STATIC_FILES = frozenset({"app.css", "app.js", "api.js", "views.js"})


_PAGE_HEADERS = {
    "Cache-Control": "no-store",
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; form-action 'none'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}
_STATIC_TYPES = {".html": "text/html", ".css": "text/css", ".js": "text/javascript"}


async def admin_page(request: web.Request) -> web.StreamResponse:
    return _static_file("index.html")


async def admin_static(request: web.Request) -> web.StreamResponse:
    name = request.match_info["name"]
    if name not in STATIC_FILES:
        raise web.HTTPNotFound()
    return _static_file(name)


def _static_file(name: str) -> web.Response:
    path = STATIC_DIR / name
    return web.Response(
        body=path.read_bytes(),
        content_type=_STATIC_TYPES[path.suffix],
        charset="utf-8",
        headers=_PAGE_HEADERS,
    )


async def admin_redirect(request: web.Request) -> web.StreamResponse:
    raise web.HTTPFound("/admin/")
