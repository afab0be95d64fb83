"""MkDocs hook: typeset every formula at build time with the vendored KaTeX.

pymdownx.arithmatex (generic) leaves ``<span class="arithmatex">\\( … \\)</span>`` and
``<div class="arithmatex">\\[ … \\]</div>`` in the page. This hook runs the site's own
``docs/assets/katex/katex.min.js`` in an embedded JavaScript engine (QuickJS, from PyPI: no
Node) and replaces each one with KaTeX's HTML, marked ``data-katex="done"``. Readers' browsers
then only need KaTeX's CSS and fonts: no 270 KB script, no maths painted twice, no layout shift.
A formula KaTeX cannot parse fails the build, naming the page and the formula.
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

from mkdocs.exceptions import PluginError

ROOT = Path(__file__).resolve().parents[1]
KATEX = ROOT / "docs" / "assets" / "katex" / "katex.min.js"
ELEMENT = re.compile(r'<(span|div) class="arithmatex">(.*?)</\1>', re.S)
DELIMITERS = {"span": (r"\(", r"\)", False), "div": (r"\[", r"\]", True)}
_context = None


def _katex():
    global _context
    if _context is None:
        import quickjs

        _context = quickjs.Context()
        _context.eval(KATEX.read_text(encoding="utf-8"))
    return _context


def render(tex: str, display: bool) -> str:
    """KaTeX's HTML for ``tex``; raises ``PluginError`` with KaTeX's message on bad TeX."""
    call = (f"katex.renderToString({json.dumps(tex)}, "
            f"{{displayMode: {'true' if display else 'false'}, throwOnError: true}})")
    try:
        return _katex().eval(call)
    except Exception as error:  # quickjs.JSException carries KaTeX's ParseError message
        raise PluginError(f"KaTeX cannot typeset {tex!r}: {error}") from None


def typeset(page_html: str, where: str = "") -> str:
    def replace(match):
        tag, source = match.group(1), html.unescape(match.group(2)).strip()
        left, right, display = DELIMITERS[tag]
        if not (source.startswith(left) and source.endswith(right)):
            raise PluginError(f"{where}: maths without {left} {right} delimiters: {source!r}")
        try:
            rendered = render(source[len(left):-len(right)], display)
        except PluginError as error:
            raise PluginError(f"{where}: {error}") from None
        return f'<{tag} class="arithmatex" data-katex="done">{rendered}</{tag}>'

    return ELEMENT.sub(replace, page_html)


def on_page_content(page_html, page, config, files):
    return typeset(page_html, page.file.src_uri)
