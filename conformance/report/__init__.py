"""The evidence bundle's human side: ``report.html``, ``certificate.{json,md}``, ``badge.svg``.

Rules of this package:
- Templates are jinja2 with autoescape on; nothing is string-built into HTML.
- ``report.html`` is one self-contained file (inline CSS, no script, no network), readable
  offline; each case is a collapsible ``<details>`` with requirement, verdict, expected vs
  actual, witness and the redacted transcript.
- Everything rendered comes from :class:`conformance.results.RunResults`, whose strings were
  redacted by the plugin; :func:`render_html` redacts once more with the secrets it is given.
"""

from __future__ import annotations

from collections.abc import Iterable

import jinja2

from ..results import PRECEDENCE, STATUS_TABLE, STATUSES, RunResults, redact, verdict_line

_ENV = jinja2.Environment(
    loader=jinja2.PackageLoader("conformance.report", "templates"),
    autoescape=jinja2.select_autoescape(enabled_extensions=("html", "j2"), default=True),
    undefined=jinja2.StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)


def family_table(results: RunResults) -> list[dict[str, object]]:
    rows: dict[str, dict[str, int]] = {}
    for c in results.cases:
        row = rows.setdefault(c.family, dict.fromkeys(STATUSES, 0))
        row[c.status] += 1
    return [{"family": f, **counts} for f, counts in sorted(rows.items())]


def render_html(results: RunResults, *, secrets: Iterable[str] = (), identity: dict | None = None) -> str:
    (mp, mt), (sp, st) = results.level_figures("MUST"), results.level_figures("SHOULD")
    html = _ENV.get_template("report.html.j2").render(
        r=results, counts=results.counts(), families=family_table(results),
        must=(mp, mt), should=(sp, st), ok=results.ok(), identity=identity or {},
        verdict=results.verdict(), verdict_line=verdict_line(results),
        statuses=STATUS_TABLE, order={s: i for i, s in enumerate(PRECEDENCE)},
    )
    return redact(html, secrets)
