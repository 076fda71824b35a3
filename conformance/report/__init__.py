"""The evidence bundle's human side: ``report.html``, ``certificate.{json,md}``, ``badge.svg``.

Rules of this package:
- Templates are jinja2 with autoescape on; nothing is string-built into HTML, and data goes into
  the page through ``tojson``.
- ``report.html`` is one self-contained file (inline CSS, a few lines of inline script for the
  route filter, no network), readable offline and without script. Cases come in the order of
  :mod:`.sections` (failures first, passes folded per family); each case is a ``<details>`` with
  requirement, verdict, expected vs actual, witness and the redacted transcript as a timeline
  (:mod:`.timeline`), or the digest of a transcript that was not kept.
- Everything rendered comes from :class:`conformance.results.RunResults`, whose strings were
  redacted by the plugin; :func:`render_html` redacts once more with the secrets it is given.
"""

from __future__ import annotations

from collections.abc import Iterable

import jinja2

from ..results import RunResults, redact, verdict_line
from . import timeline
from .sections import columns, family_rows, sections

_ENV = jinja2.Environment(
    loader=jinja2.PackageLoader("conformance.report", "templates"),
    autoescape=jinja2.select_autoescape(enabled_extensions=("html", "j2"), default=True),
    undefined=jinja2.StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)
_ENV.globals.update(timeline_rows=timeline.rows, timeline_routes=timeline.routes,
                    lanes=("control plane", "runner", "Hermes"))


def family_table(results: RunResults) -> list[dict[str, object]]:
    """Per family, its count of each status (``{"family": …, "pass": n, …}``; the terminal's)."""
    return [{"family": row["family"], **row["counts"]} for row in family_rows(results.cases)]


def render_html(results: RunResults, *, secrets: Iterable[str] = (), identity: dict | None = None) -> str:
    (mp, mt), (sp, st) = results.level_figures("MUST"), results.level_figures("SHOULD")
    html = _ENV.get_template("report.html.j2").render(
        r=results, counts=results.counts(), columns=columns(results.cases),
        families=family_rows(results.cases), sections=sections(results.cases),
        must=(mp, mt), should=(sp, st), ok=results.ok(), identity=identity or {},
        verdict=results.verdict(), verdict_line=verdict_line(results),
    )
    return redact(html, secrets)
