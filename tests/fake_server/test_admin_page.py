"""The admin page's static files: every file of fake_server/static is served (and nothing else),
the ES modules app.js imports are among them, and each answer carries the page's CSP."""
from __future__ import annotations

import re

import aiohttp

from fake_server import ControlPlane
from fake_server.admin_page import STATIC_DIR, STATIC_FILES

IMPORT = re.compile(r'''^import\b[^;]*?\bfrom\s+"\./([\w.-]+)";''', re.M | re.S)


def imports_of(name: str) -> set[str]:
    return set(IMPORT.findall((STATIC_DIR / name).read_text(encoding="utf-8")))


def test_every_static_file_but_the_page_is_listed_and_every_listed_one_exists() -> None:
    on_disk = {p.name for p in STATIC_DIR.iterdir() if p.is_file()} - {"index.html"}
    assert on_disk == STATIC_FILES


def test_the_page_loads_app_js_as_a_module_and_its_imports_are_served() -> None:
    page = (STATIC_DIR / "index.html").read_text(encoding="utf-8")
    assert '<script type="module" src="/admin/static/app.js"></script>' in page
    seen, todo = set(), ["app.js"]
    while todo:
        name = todo.pop()
        seen.add(name)
        todo += sorted(imports_of(name) - seen)
    assert seen == {n for n in STATIC_FILES if n.endswith(".js")}
    assert imports_of("app.js") == {"api.js", "views.js"}  # the import pattern can match


async def test_static_files_are_served_with_the_page_headers(cp: ControlPlane) -> None:
    async with aiohttp.ClientSession() as http:
        for name in sorted(STATIC_FILES):
            async with http.get(f"{cp.url}/admin/static/{name}") as resp:
                assert resp.status == 200, name
                want = "text/javascript" if name.endswith(".js") else "text/css"
                assert resp.content_type == want, name
                assert "script-src 'self'" in resp.headers["Content-Security-Policy"]
                assert resp.headers["Cache-Control"] == "no-store"
                assert await resp.read() == (STATIC_DIR / name).read_bytes()
        for name in ("index.html", "nope.js", "app.js.map"):
            async with http.get(f"{cp.url}/admin/static/{name}") as resp:
                assert resp.status == 404, name
