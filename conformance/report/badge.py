"""``badge.svg``: a shields-style badge generated here (no network), e.g. ``protocol 1 | core 42/42``."""

from __future__ import annotations

from xml.sax.saxutils import escape

GREEN, RED, GREY = "#2ea043", "#cf222e", "#6e7781"
CHAR_W = 6.6  # px per character of 11px Verdana, near enough for a badge


def badge_svg(label: str, message: str, color: str) -> str:
    lw, mw = int(len(label) * CHAR_W) + 12, int(len(message) * CHAR_W) + 12
    w = lw + mw
    lab, msg = escape(label), escape(message)
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="20" role="img" '
        f'aria-label="{lab}: {msg}"><title>{lab}: {msg}</title>'
        f'<rect width="{lw}" height="20" fill="#555"/>'
        f'<rect x="{lw}" width="{mw}" height="20" fill="{color}"/>'
        '<g fill="#fff" text-anchor="middle" font-family="Verdana,DejaVu Sans,sans-serif" '
        'font-size="11">'
        f'<text x="{lw / 2:.1f}" y="14">{lab}</text>'
        f'<text x="{lw + mw / 2:.1f}" y="14">{msg}</text></g></svg>\n'
    )


def certification_badge(profile: str, must_passed: int, must_total: int, ok: bool) -> str:
    color = GREY if must_total == 0 else (GREEN if ok and must_passed == must_total else RED)
    return badge_svg("runner protocol 1", f"{profile} MUST {must_passed}/{must_total}", color)
